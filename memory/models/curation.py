"""What the companion keeps beyond raw lines (SPEC C1-C7)."""

from django.conf import settings
from django.db import models

from memory.models.archive import Message, Profile
from memory.models.base import ProfileScopedQuerySet, choices_check


class HighlightSource(models.TextChoices):
    USER = "user", "user favourite"
    ASSISTANT = "assistant", "companion [[fav:]] marker"
    IMPORT = "import", "legacy import"


class Highlight(models.Model):
    """A verbatim quote from a real archived message (C1)."""

    Source = HighlightSource

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="highlights")
    hid = models.CharField(max_length=64)
    # Null only for flagged legacy rows whose message is missing.
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.CASCADE, related_name="highlights"
    )
    mid = models.CharField(max_length=64, help_text="The source message id as recorded.")
    content = models.TextField()
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.USER)
    created_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)
    # Non-empty: imported with a broken reference (LEGACY_KV 6); never used in recall.
    flagged = models.CharField(max_length=200, blank=True)
    legacy_key = models.CharField(max_length=300, blank=True)
    legacy_extra = models.JSONField(default=dict, blank=True)

    objects = ProfileScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["profile", "hid"], name="highlight_unique_hid"),
            choices_check("source", HighlightSource, "highlight_source_valid"),
            models.CheckConstraint(
                condition=models.Q(message__isnull=False) | ~models.Q(flagged=""),
                name="highlight_message_or_flagged",
            ),
        ]
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"{self.hid}: {self.content[:40]}"


class Favourite(models.Model):
    """A user's bookmark of a message or a part of it (C2); it also makes a highlight."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="favourites")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="favourites")
    excerpt = models.TextField(help_text="The favourited text; the whole message when empty.")
    highlight = models.ForeignKey(
        Highlight, null=True, blank=True, on_delete=models.SET_NULL, related_name="favourites"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProfileScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"★ {self.excerpt[:40]}"


class ExperienceQuerySet(ProfileScopedQuerySet):
    def valid(self):
        """Currently true (C5): live and not invalidated."""
        return self.live().filter(invalid_at__isnull=True, flagged="")

    def active(self):
        return self.valid().filter(status=Experience.Status.ACTIVE)

    def candidates(self):
        return self.valid().filter(status=Experience.Status.CANDIDATE)


class ExperienceStatus(models.TextChoices):
    ACTIVE = "active", "confirmed"
    CANDIDATE = "candidate", "candidate"
    REJECTED = "rejected", "rejected"


class ExperienceTimeCertainty(models.TextChoices):
    EXACT = "exact", "exact"
    APPROXIMATE = "approximate", "approximate"
    UNKNOWN = "unknown", "unknown"


class Experience(models.Model):
    """A derived memory with its sources (C3), bi-temporal (C5)."""

    Status = ExperienceStatus

    TimeCertainty = ExperienceTimeCertainty

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="experiences")
    eid = models.CharField(max_length=64)
    title = models.CharField(max_length=300)
    content = models.TextField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CANDIDATE)
    time_certainty = models.CharField(
        max_length=12, choices=TimeCertainty.choices, default=TimeCertainty.UNKNOWN
    )
    # When it happened (valid time), as a datetime when known and as the legacy text verbatim.
    event_time = models.DateTimeField(null=True, blank=True)
    event_time_text = models.CharField(max_length=100, blank=True)
    # When we learned it (transaction time) and when it stopped being true.
    recorded_at = models.DateTimeField()
    invalid_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    flagged = models.CharField(max_length=200, blank=True)
    legacy_key = models.CharField(max_length=300, blank=True)
    legacy_extra = models.JSONField(default=dict, blank=True)
    sources = models.ManyToManyField(
        Message, through="ExperienceSource", related_name="experiences", blank=True
    )

    objects = ExperienceQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["profile", "eid"], name="experience_unique_eid"),
            choices_check("status", ExperienceStatus, "experience_status_valid"),
            choices_check("time_certainty", ExperienceTimeCertainty, "experience_time_certainty_valid"),
        ]
        ordering = ["-recorded_at", "id"]

    def __str__(self) -> str:
        return f"{self.eid}: {self.title}"

    @property
    def source_mids(self) -> list[str]:
        return [s.mid for s in self.source_links.all()]


class ExperienceSource(models.Model):
    """One cited message of an experience; `message` is null only for flagged legacy rows."""

    experience = models.ForeignKey(Experience, on_delete=models.CASCADE, related_name="source_links")
    mid = models.CharField(max_length=64)
    message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["experience", "mid"], name="experience_source_unique"),
        ]
        ordering = ["experience_id", "position"]

    def __str__(self) -> str:
        return f"{self.experience_id} ← {self.mid}"


class ExperienceHistoryActor(models.TextChoices):
    USER = "user", "user"
    ADMIN = "admin", "admin"
    AGENT = "agent", "agent"
    IMPORT = "import", "import"
    SYSTEM = "system", "system"


class ExperienceHistory(models.Model):
    """Every change to an experience keeps the previous value (C4)."""

    Actor = ExperienceHistoryActor

    experience = models.ForeignKey(Experience, on_delete=models.CASCADE, related_name="history")
    actor = models.CharField(max_length=10, choices=Actor.choices)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    action = models.CharField(max_length=20)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [choices_check("actor", ExperienceHistoryActor, "experience_history_actor_valid")]
        ordering = ["experience_id", "created_at", "id"]
        verbose_name_plural = "experience history"

    def __str__(self) -> str:
        return f"{self.experience_id} {self.action} by {self.actor}"


class RelationType(models.TextChoices):
    RELATED = "related", "related"
    CAUSES = "causes", "causes"
    FOLLOWS = "follows", "follows"
    CONTRADICTS = "contradicts", "contradicts"
    PART_OF = "part_of", "part of"


class Relation(models.Model):
    """A typed link between two highlights/experiences (C6); the five legacy types."""

    Type = RelationType

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="relations")
    rid = models.CharField(max_length=64)
    type = models.CharField(max_length=12, choices=Type.choices)
    # The ends as the legacy ids (hid or eid), and resolved when they exist.
    from_id = models.CharField(max_length=64)
    to_id = models.CharField(max_length=64)
    from_highlight = models.ForeignKey(
        Highlight, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    from_experience = models.ForeignKey(
        Experience, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    to_highlight = models.ForeignKey(
        Highlight, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    to_experience = models.ForeignKey(
        Experience, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)
    flagged = models.CharField(max_length=200, blank=True)
    legacy_key = models.CharField(max_length=300, blank=True)
    legacy_extra = models.JSONField(default=dict, blank=True)

    objects = ProfileScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["profile", "rid"], name="relation_unique_rid"),
            choices_check("type", RelationType, "relation_type_valid"),
            # Each end is at most one thing; an unresolved end is allowed only when flagged.
            models.CheckConstraint(
                condition=~models.Q(from_highlight__isnull=False, from_experience__isnull=False)
                & ~models.Q(to_highlight__isnull=False, to_experience__isnull=False),
                name="relation_end_is_one_thing",
            ),
            models.CheckConstraint(
                condition=~models.Q(flagged="")
                | (
                    (models.Q(from_highlight__isnull=False) | models.Q(from_experience__isnull=False))
                    & (models.Q(to_highlight__isnull=False) | models.Q(to_experience__isnull=False))
                ),
                name="relation_ends_resolved_or_flagged",
            ),
        ]
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"{self.from_id} -{self.type}-> {self.to_id}"
