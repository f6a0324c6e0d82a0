"""What the companion keeps beyond raw lines (SPEC C1-C7)."""

from django.conf import settings
from django.db import connections, models, transaction
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from memory.models.archive import Message, Profile
from memory.models.base import ProfileScopedQuerySet, choices_check, flaggable_legacy_columns


class HighlightSource(models.TextChoices):
    USER = "user", _("user favourite")
    ASSISTANT = "assistant", _("companion [[fav:]] marker")
    IMPORT = "import", _("legacy import")


class HighlightQuerySet(ProfileScopedQuerySet):
    def usable(self):
        """Live, not flagged, and quoting a message that is itself live (what recall may show)."""
        return self.live().filter(flagged="", message__deleted_at__isnull=True)


# The newest usable highlights and valid active/candidate experiences (Highlight.objects.usable(),
# Experience.objects.valid(), newest first), in one statement of plain SQL: this runs on every
# turn and the ORM's query building cost more than the look-up itself (BENCH §2).
_RECALL_POOL_SQL = (
    "SELECT kind, id, ref, title, content, status FROM ("
    " SELECT * FROM (SELECT 'h' AS kind, h.id, h.mid AS ref, '' AS title, h.content, '' AS status,"
    " h.created_at AS at FROM memory_highlight h LEFT OUTER JOIN memory_message m ON m.id = h.message_id"
    " WHERE h.profile_id = %s AND h.deleted_at IS NULL AND h.flagged = '' AND m.deleted_at IS NULL"
    " ORDER BY h.created_at DESC LIMIT %s) hl"
    " UNION ALL"
    " SELECT * FROM (SELECT 'e' AS kind, e.id, e.eid AS ref, e.title, e.content, e.status, e.recorded_at AS at"
    " FROM memory_experience e"
    " WHERE e.profile_id = %s AND e.deleted_at IS NULL AND e.flagged = '' AND e.invalid_at IS NULL"
    " AND e.status IN (%s, %s) ORDER BY e.recorded_at DESC LIMIT %s) ex"
    ") curated ORDER BY kind, at DESC"
)


class HighlightManager(models.Manager.from_queryset(HighlightQuerySet)):
    def recall_pool(self, profile_id: int, *, limit: int) -> tuple[list["Highlight"], list["Experience"]]:
        """(usable highlights, valid active/candidate experiences) recall may show, newest first,
        at most `limit` each, in one statement (the test compares it with both querysets).

        Loaded with the columns the prompt uses; any other field loads on access (deferred)."""
        params = [profile_id, limit, profile_id, Experience.Status.ACTIVE, Experience.Status.CANDIDATE, limit]
        with connections[self.db].cursor() as cursor:
            cursor.execute(_RECALL_POOL_SQL, params)
            rows = cursor.fetchall()
        highlights = [
            Highlight.from_db(self.db, ["id", "mid", "content"], (pk, mid, content))
            for kind, pk, mid, _, content, _ in rows if kind == "h"
        ]
        experiences = [
            Experience.from_db(self.db, ["id", "eid", "title", "content", "status"], row[1:])
            for row in rows if row[0] == "e"
        ]
        return highlights, experiences


class Highlight(models.Model):
    """A verbatim quote from a real archived message (C1)."""

    Source = HighlightSource

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="highlights", verbose_name=_("profile"))
    hid = models.CharField(max_length=64, verbose_name=_("hid"))
    # Null only for flagged legacy rows whose message is missing.
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.CASCADE, related_name="highlights", verbose_name=_("message")
    )
    mid = models.CharField(max_length=64, help_text=_("The source message id as recorded."), verbose_name=_("mid"))
    content = models.TextField(verbose_name=_("content"))
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.USER, verbose_name=_("source"))
    created_at = models.DateTimeField(verbose_name=_("created at"))
    deleted_at, reviewed_at, flagged, legacy_key, legacy_extra = flaggable_legacy_columns()

    objects = HighlightManager()

    class Meta:
        verbose_name = _("highlight")
        verbose_name_plural = _("highlights")
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

    @property
    def item_id(self) -> str:
        return self.hid

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    @transaction.atomic
    def soft_delete(self, *, at=None) -> int:
        """Hide the highlight (never its message, C1) and the relations touching it (C7)."""
        at = at or timezone.now()
        if self.deleted_at is None:
            self.deleted_at = at
            self.save(update_fields=["deleted_at"])
        return Relation.objects.touching(self).live().update(deleted_at=at)

    def restore(self) -> bool:
        """Undo a soft delete (the relations stay as they are; restore them one by one)."""
        if self.deleted_at is None:
            return False
        self.deleted_at = None
        self.save(update_fields=["deleted_at"])
        return True


class Favourite(models.Model):
    """A user's bookmark of a message or a part of it (C2); it also makes a highlight."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="favourites", verbose_name=_("profile"))
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="favourites", verbose_name=_("message"))
    excerpt = models.TextField(help_text=_("The favourited text; the whole message when empty."), verbose_name=_("excerpt"))
    highlight = models.ForeignKey(
        Highlight, null=True, blank=True, on_delete=models.SET_NULL, related_name="favourites", verbose_name=_("highlight")
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    objects = ProfileScopedQuerySet.as_manager()

    class Meta:
        verbose_name = _("favourite")
        verbose_name_plural = _("favourites")
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
    ACTIVE = "active", _("confirmed")
    CANDIDATE = "candidate", _("candidate")
    REJECTED = "rejected", _("rejected")


class ExperienceTimeCertainty(models.TextChoices):
    EXACT = "exact", _("exact")
    APPROXIMATE = "approximate", _("approximate")
    UNKNOWN = "unknown", _("unknown")


class Experience(models.Model):
    """A derived memory with its sources (C3), bi-temporal (C5)."""

    Status = ExperienceStatus

    TimeCertainty = ExperienceTimeCertainty

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="experiences", verbose_name=_("profile"))
    eid = models.CharField(max_length=64, verbose_name=_("eid"))
    title = models.CharField(max_length=300, verbose_name=_("title"))
    content = models.TextField(verbose_name=_("content"))
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CANDIDATE, verbose_name=_("status"))
    time_certainty = models.CharField(
        max_length=12, choices=TimeCertainty.choices, default=TimeCertainty.UNKNOWN, verbose_name=_("time certainty")
    )
    # When it happened (valid time), as a datetime when known and as the legacy text verbatim.
    event_time = models.DateTimeField(null=True, blank=True, verbose_name=_("event time"))
    event_time_text = models.CharField(max_length=100, blank=True, verbose_name=_("event time text"))
    # When we learned it (transaction time) and when it stopped being true.
    recorded_at = models.DateTimeField(verbose_name=_("recorded at"))
    invalid_at = models.DateTimeField(null=True, blank=True, verbose_name=_("invalid at"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))
    deleted_at, reviewed_at, flagged, legacy_key, legacy_extra = flaggable_legacy_columns()
    sources = models.ManyToManyField(
        Message, through="ExperienceSource", related_name="experiences", blank=True, verbose_name=_("sources")
    )

    objects = ExperienceQuerySet.as_manager()

    class Meta:
        verbose_name = _("experience")
        verbose_name_plural = _("experiences")
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

    @property
    def item_id(self) -> str:
        return self.eid

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    @property
    def is_valid(self) -> bool:
        """Currently true (C5): live, not invalidated, not flagged."""
        return self.deleted_at is None and self.invalid_at is None and not self.flagged

    def snapshot(self) -> dict:
        """The values a history row keeps (C4)."""
        return {
            "title": self.title,
            "content": self.content,
            "status": self.status,
            "time_certainty": self.time_certainty,
            "event_time": self.event_time.isoformat() if self.event_time else None,
            "invalid_at": self.invalid_at.isoformat() if self.invalid_at else None,
            "deleted_at": self.deleted_at.isoformat() if self.deleted_at else None,
            "source_mids": self.source_mids,
        }

    def record(
        self, *, action: str, before: dict | None, by=None, actor: str | None = None, reason: str = "", note: dict | None = None
    ) -> "ExperienceHistory":
        """Write the history row of one change (C4); `actor` defaults to user when `by` is given."""
        return ExperienceHistory.objects.create(
            experience=self,
            actor=actor or (ExperienceHistory.Actor.USER if by else ExperienceHistory.Actor.SYSTEM),
            actor_user=by if getattr(by, "pk", None) else None,
            action=action,
            before=before,
            after=self.snapshot() | (note or {}),
            reason=reason,
        )

    def _change(self, action: str, fields: dict, *, by, actor, reason) -> bool:
        """Apply `fields`, save and record history; False (and no row) when nothing changed."""
        if self.deleted_at is not None:
            raise ExperienceStateError(gettext("Experience %(eid)s is deleted.") % {"eid": self.eid})
        if all(getattr(self, k) == v for k, v in fields.items()):
            return False
        with transaction.atomic():
            before = self.snapshot()
            for k, v in fields.items():
                setattr(self, k, v)
            self.save(update_fields=[*fields, "updated_at"])
            self.record(action=action, before=before, by=by, actor=actor, reason=reason)
        return True

    def confirm(self, *, by=None, actor: str | None = None, reason: str = "") -> bool:
        """Candidate (or rejected) → active (C3)."""
        if self.invalid_at is not None:
            raise ExperienceStateError(
                gettext("Experience %(eid)s was invalidated; it cannot be confirmed.") % {"eid": self.eid})
        return self._change("confirm", {"status": self.Status.ACTIVE}, by=by, actor=actor, reason=reason)

    def reject(self, *, by=None, actor: str | None = None, reason: str = "") -> bool:
        """Candidate (or active) → rejected (C3); recall never uses rejected ones."""
        return self._change("reject", {"status": self.Status.REJECTED}, by=by, actor=actor, reason=reason)

    def edit(self, *, by=None, actor: str | None = None, reason: str = "", **changes) -> bool:
        """Update title/content/event_time/time_certainty/event_time_text, keeping the old values (C4)."""
        allowed = {"title", "content", "event_time", "event_time_text", "time_certainty"}
        unknown = set(changes) - allowed
        if unknown:
            raise ExperienceStateError(gettext("These fields cannot be edited: %(fields)s.") % {"fields": ", ".join(sorted(unknown))})
        return self._change("edit", changes, by=by, actor=actor, reason=reason)

    def invalidate(self, *, by=None, actor: str | None = None, reason: str = "", at=None) -> bool:
        """It stopped being true (C5): set invalid_at, keep the row and its history."""
        if self.invalid_at is not None:
            return False
        return self._change("invalidate", {"invalid_at": at or timezone.now()}, by=by, actor=actor, reason=reason)

    def revalidate(self, *, by=None, actor: str | None = None, reason: str = "") -> bool:
        """Undo an invalidation made by mistake."""
        return self._change("revalidate", {"invalid_at": None}, by=by, actor=actor, reason=reason)

    def merge(self, other: "Experience", *, by=None, actor: str | None = None, reason: str = "", title=None, content=None) -> "Experience":
        """Fold `other` into this one: sources combined here, `other` invalidated, pointing here (C4)."""
        if other.pk == self.pk or other.profile_id != self.profile_id:
            raise ExperienceStateError(gettext("A merge needs two different experiences of the same profile."))
        if other.deleted_at is not None or self.deleted_at is not None:
            raise ExperienceStateError(gettext("A deleted experience cannot be merged."))
        with transaction.atomic():
            before = self.snapshot()
            known = set(self.source_mids)
            position = self.source_links.count()
            for link in other.source_links.all():
                if link.mid not in known:
                    ExperienceSource.objects.create(
                        experience=self, mid=link.mid, message=link.message, position=position
                    )
                    known.add(link.mid)
                    position += 1
            if title is not None:
                self.title = title
            if content is not None:
                self.content = content
            self.save()
            why = reason or f"merged {other.eid} into {self.eid}"
            self.record(action="merge", before=before, by=by, actor=actor, reason=why, note={"merged_from": other.eid})
            other_before = other.snapshot()
            other.invalid_at = other.invalid_at or timezone.now()
            other.save(update_fields=["invalid_at", "updated_at"])
            other.record(
                action="merged_into",
                before=other_before,
                by=by,
                actor=actor,
                reason=f"merged into {self.eid}" + (f": {reason}" if reason else ""),
                note={"merged_into": self.eid},
            )
        return self

    @transaction.atomic
    def soft_delete(self, *, by=None, actor: str | None = None, reason: str = "", at=None) -> int:
        """Hide the experience and soft-delete the relations touching it (C7); returns relations hidden."""
        at = at or timezone.now()
        if self.deleted_at is None:
            before = self.snapshot()
            self.deleted_at = at
            self.save(update_fields=["deleted_at", "updated_at"])
            self.record(action="delete", before=before, by=by, actor=actor, reason=reason)
        return Relation.objects.touching(self).live().update(deleted_at=at)

    def restore(self, *, by=None, actor: str | None = None, reason: str = "") -> bool:
        """Undo a soft delete."""
        if self.deleted_at is None:
            return False
        with transaction.atomic():
            before = self.snapshot()
            self.deleted_at = None
            self.save(update_fields=["deleted_at", "updated_at"])
            self.record(action="restore", before=before, by=by, actor=actor, reason=reason)
        return True


class ExperienceStateError(Exception):
    """The change does not apply to the experience as it is (deleted, invalidated, ...); the
    message is in the active language (issue 25 point 7), shown to the person as it is."""


class ExperienceSource(models.Model):
    """One cited message of an experience; `message` is null only for flagged legacy rows."""

    experience = models.ForeignKey(Experience, on_delete=models.CASCADE, related_name="source_links", verbose_name=_("experience"))
    mid = models.CharField(max_length=64, verbose_name=_("mid"))
    message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, verbose_name=_("message"))
    position = models.PositiveSmallIntegerField(default=0, verbose_name=_("position"))

    class Meta:
        verbose_name = _("experience source")
        verbose_name_plural = _("experience sources")
        constraints = [
            models.UniqueConstraint(fields=["experience", "mid"], name="experience_source_unique"),
        ]
        ordering = ["experience_id", "position"]

    def __str__(self) -> str:
        return f"{self.experience_id} ← {self.mid}"


class ExperienceHistoryActor(models.TextChoices):
    USER = "user", _("user")
    ADMIN = "admin", _("admin")
    AGENT = "agent", _("agent")
    IMPORT = "import", _("import")
    SYSTEM = "system", _("system")


class ExperienceHistory(models.Model):
    """Every change to an experience keeps the previous value (C4)."""

    Actor = ExperienceHistoryActor

    experience = models.ForeignKey(Experience, on_delete=models.CASCADE, related_name="history", verbose_name=_("experience"))
    actor = models.CharField(max_length=10, choices=Actor.choices, verbose_name=_("actor"))
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, verbose_name=_("actor user")
    )
    action = models.CharField(max_length=20, verbose_name=_("action"))
    before = models.JSONField(null=True, blank=True, verbose_name=_("before"))
    after = models.JSONField(null=True, blank=True, verbose_name=_("after"))
    reason = models.TextField(blank=True, verbose_name=_("reason"))
    # The agent's changes name the evolution run that made them (issue 19).
    run = models.ForeignKey(
        "memory.EvolutionRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="experience_changes",
        verbose_name=_("run"),
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("experience history")
        constraints = [choices_check("actor", ExperienceHistoryActor, "experience_history_actor_valid")]
        ordering = ["experience_id", "created_at", "id"]
        verbose_name_plural = _("experience history")

    def __str__(self) -> str:
        return f"{self.experience_id} {self.action} by {self.actor}"


class RelationType(models.TextChoices):
    RELATED = "related", _("related")
    CAUSES = "causes", _("causes")
    FOLLOWS = "follows", _("follows")
    CONTRADICTS = "contradicts", _("contradicts")
    PART_OF = "part_of", _("part of")


class RelationQuerySet(ProfileScopedQuerySet):
    def touching(self, item):
        """Relations with `item` (a Highlight or an Experience) at either end."""
        if isinstance(item, Highlight):
            q = models.Q(from_highlight=item) | models.Q(to_highlight=item)
        else:
            q = models.Q(from_experience=item) | models.Q(to_experience=item)
        return self.filter(q)

    def touching_any(self, *, highlights=(), experiences=()):
        return self.filter(
            models.Q(from_highlight__in=highlights)
            | models.Q(to_highlight__in=highlights)
            | models.Q(from_experience__in=experiences)
            | models.Q(to_experience__in=experiences)
        )


class Relation(models.Model):
    """A typed link between two highlights/experiences (C6); the five legacy types."""

    Type = RelationType

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="relations", verbose_name=_("profile"))
    rid = models.CharField(max_length=64, verbose_name=_("rid"))
    type = models.CharField(max_length=12, choices=Type.choices, verbose_name=_("type"))
    # The ends as the legacy ids (hid or eid), and resolved when they exist.
    from_id = models.CharField(max_length=64, verbose_name=_("from id"))
    to_id = models.CharField(max_length=64, verbose_name=_("to id"))
    from_highlight = models.ForeignKey(
        Highlight, null=True, blank=True, on_delete=models.CASCADE, related_name="+", verbose_name=_("from highlight")
    )
    from_experience = models.ForeignKey(
        Experience, null=True, blank=True, on_delete=models.CASCADE, related_name="+", verbose_name=_("from experience")
    )
    to_highlight = models.ForeignKey(
        Highlight, null=True, blank=True, on_delete=models.CASCADE, related_name="+", verbose_name=_("to highlight")
    )
    to_experience = models.ForeignKey(
        Experience, null=True, blank=True, on_delete=models.CASCADE, related_name="+", verbose_name=_("to experience")
    )
    created_at = models.DateTimeField(verbose_name=_("created at"))
    deleted_at, reviewed_at, flagged, legacy_key, legacy_extra = flaggable_legacy_columns()

    objects = RelationQuerySet.as_manager()

    class Meta:
        verbose_name = _("relation")
        verbose_name_plural = _("relations")
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

    @property
    def source(self):
        return self.from_highlight or self.from_experience

    @property
    def target(self):
        return self.to_highlight or self.to_experience

    def soft_delete(self, *, at=None) -> bool:
        if self.deleted_at is not None:
            return False
        self.deleted_at = at or timezone.now()
        self.save(update_fields=["deleted_at"])
        return True

    def restore(self) -> bool:
        if self.deleted_at is None:
            return False
        self.deleted_at = None
        self.save(update_fields=["deleted_at"])
        return True
