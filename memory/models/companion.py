"""What a character card brings to a companion (SPEC H2), and the card's catch-up (H3).

- `CompanionCard`: the card a companion was made from — its identity (so importing the same
  card again updates the companion instead of adding one) and its fields as imported (for the
  settings page and a faithful V2 export).
- `LoreEntry`: the card's lorebook (`character_book.entries`): an enabled entry enters the
  prompt, quoted as data and within the R4 budget, when one of its keys is in the last turns
  (`memory/lorebook.py`).
- `CatchUp`: one catch-up of the Previously Agent over a companion's closed slices, oldest
  first (`previously.agent.lifecycle`): its progress, and whether the person asked it to stop.
"""

from django.db import connections, models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from memory.models.archive import Profile, Slice
from memory.models.base import choices_check


class CompanionCard(models.Model):
    """The character card a companion was made from or last updated by (H2)."""

    profile = models.OneToOneField(
        Profile, on_delete=models.CASCADE, related_name="companion_card", verbose_name=_("profile")
    )
    # sha256 of the card's name and creator (or name and first message): the same card imported
    # again finds its companion (memory.interop.character_card.card_identity).
    identity = models.CharField(max_length=64, db_index=True, verbose_name=_("identity"))
    spec = models.CharField(max_length=20, verbose_name=_("spec"))
    # The card's `data` as imported, lorebook and image left out (they have their own homes).
    data = models.JSONField(default=dict, blank=True, verbose_name=_("data"))
    # The lorebook's own fields (name, scan_depth, token_budget…), its entries left out.
    book = models.JSONField(default=dict, blank=True, verbose_name=_("book"))
    # The persona as the import built it: an export gives back the card's own fields while the
    # person has not rewritten the persona since.
    persona_built = models.TextField(blank=True, verbose_name=_("persona built"))
    source_name = models.CharField(max_length=200, blank=True, verbose_name=_("source file"))
    imported_at = models.DateTimeField(verbose_name=_("imported at"))

    class Meta:
        verbose_name = _("companion card")
        verbose_name_plural = _("companion cards")

    def __str__(self) -> str:
        return f"{self.profile} ← {self.data.get('name', '')}"


class LoreEntryQuerySet(models.QuerySet):
    def for_profile(self, profile):
        return self.filter(profile=profile)

    def enabled(self):
        return self.filter(enabled=True)

    def scan_keys(self, profile_id: int) -> list[tuple]:
        """(pk, keys, secondary_keys, constant, selective, case_sensitive) of the profile's
        enabled entries with content: `filter(profile_id=…, enabled=True).exclude(content="")
        .values_list(…)` in one plain statement. Every turn asks (memory.lorebook), most
        companions have no lorebook, and the ORM's query building cost ten times the read."""
        conn = connections[self.db]
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT id, keys, secondary_keys, constant, selective, case_sensitive FROM memory_loreentry"
                " WHERE profile_id = %s AND enabled AND content <> ''", [profile_id]
            )
            rows = cursor.fetchall()
        keys_field, secondary_field = (self.model._meta.get_field(name) for name in ("keys", "secondary_keys"))
        return [
            (pk, keys_field.from_db_value(keys, None, conn), secondary_field.from_db_value(secondary, None, conn),
             bool(constant), bool(selective), bool(case_sensitive))
            for pk, keys, secondary, constant, selective, case_sensitive in rows
        ]


class LoreEntry(models.Model):
    """One lorebook entry of a companion's card (`character_book.entries[i]`)."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="lore_entries", verbose_name=_("profile"))
    position = models.PositiveIntegerField(verbose_name=_("position"))  # its place in the card's book
    name = models.CharField(max_length=200, blank=True, verbose_name=_("name"))
    keys = models.JSONField(default=list, blank=True, verbose_name=_("keys"))
    secondary_keys = models.JSONField(default=list, blank=True, verbose_name=_("secondary keys"))
    content = models.TextField(verbose_name=_("content"))
    enabled = models.BooleanField(default=True, verbose_name=_("enabled"))
    constant = models.BooleanField(default=False, verbose_name=_("always in the prompt"))
    selective = models.BooleanField(default=False, verbose_name=_("needs a secondary key too"))
    case_sensitive = models.BooleanField(default=False, verbose_name=_("case sensitive"))
    insertion_order = models.IntegerField(default=100, verbose_name=_("insertion order"))
    priority = models.IntegerField(default=0, verbose_name=_("priority"))
    # The entry's other fields (id, comment, position, extensions…), kept for the export.
    extra = models.JSONField(default=dict, blank=True, verbose_name=_("extra"))

    objects = LoreEntryQuerySet.as_manager()

    class Meta:
        verbose_name = _("lorebook entry")
        verbose_name_plural = _("lorebook entries")
        ordering = ["profile_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "position"], name="lore_unique_position_per_profile"),
        ]

    def __str__(self) -> str:
        return self.name or ", ".join(self.keys)[:80]


class CatchUpStatus(models.TextChoices):
    RUNNING = "running", _("running")
    STOPPING = "stopping", _("stopping")
    STOPPED = "stopped", _("stopped")
    FINISHED = "finished", _("finished")
    FAILED = "failed", _("failed")


class CatchUp(models.Model):
    """One catch-up of the card over a companion's closed slices, oldest first (H3).

    At most one runs per profile (`running` or `stopping`). Each step evolves one slice through
    `previously.agent.lifecycle`; a stopped catch-up is resumed by starting another, which skips
    the slices already evolved."""

    Status = CatchUpStatus

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="catch_ups", verbose_name=_("profile"))
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING, verbose_name=_("status"))
    since = models.DateField(null=True, blank=True, verbose_name=_("since"))
    max_slices = models.PositiveIntegerField(null=True, blank=True, verbose_name=_("at most slices"))
    planned = models.PositiveIntegerField(default=0, verbose_name=_("planned runs"))
    done = models.PositiveIntegerField(default=0, verbose_name=_("runs done"))
    failed = models.PositiveIntegerField(default=0, verbose_name=_("runs failed"))
    current = models.ForeignKey(
        Slice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("current slice")
    )
    error = models.TextField(blank=True, verbose_name=_("error"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished at"))

    class Meta:
        verbose_name = _("catch-up")
        verbose_name_plural = _("catch-ups")
        ordering = ["-created_at", "-id"]
        constraints = [
            choices_check("status", CatchUpStatus, "catchup_status_valid"),
            models.UniqueConstraint(
                fields=["profile"], condition=Q(status__in=["running", "stopping"]), name="catchup_one_active_per_profile"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.profile} catch-up {self.done}/{self.planned} ({self.status})"

    @property
    def active(self) -> bool:
        return self.status in (CatchUpStatus.RUNNING, CatchUpStatus.STOPPING)
