"""The "Previously On" card: live card, per-slice snapshots, evolution runs (SPEC K)."""

from django.db import connections, models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from memory.models.archive import Profile, Slice
from memory.models.base import choices_check


class CardManager(models.Manager):
    def version_of(self, profile_id: int) -> int | None:
        """`filter(profile_id=…).values_list("version", flat=True).first()` in one plain
        statement: every turn's trace reads it (U4), where the ORM's query building cost four
        times the read (BENCH §4)."""
        with connections[self.db].cursor() as cursor:
            cursor.execute("SELECT version FROM memory_card WHERE profile_id = %s", [profile_id])
            row = cursor.fetchone()
        return row[0] if row else None


class Card(models.Model):
    """The live card of a profile (K1); `version` guards concurrent writers (K8)."""

    profile = models.OneToOneField(Profile, on_delete=models.CASCADE, related_name="card", verbose_name=_("profile"))
    text = models.TextField(blank=True, verbose_name=_("text"))
    format = models.CharField(max_length=16, default="v5", verbose_name=_("format"))
    version = models.PositiveIntegerField(default=0, verbose_name=_("version"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    objects = CardManager()

    class Meta:
        verbose_name = _("card")
        verbose_name_plural = _("cards")
        constraints = [
            models.CheckConstraint(condition=models.Q(version__gte=0), name="card_version_positive")
        ]

    def __str__(self) -> str:
        return gettext("card of %(profile)s, version %(version)s") % {"profile": self.profile, "version": self.version}


class CardSnapshot(models.Model):
    """The card as it was when a slice ended (K8, K12)."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="card_snapshots", verbose_name=_("profile"))
    slice = models.OneToOneField(Slice, on_delete=models.CASCADE, related_name="card_snapshot", verbose_name=_("slice"))
    text = models.TextField(blank=True, verbose_name=_("text"))
    card_version = models.PositiveIntegerField(default=0, verbose_name=_("card version"))
    run = models.ForeignKey(
        "EvolutionRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="snapshots", verbose_name=_("run")
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("card snapshot")
        verbose_name_plural = _("card snapshots")
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return gettext("card at the end of %(slice)s") % {"slice": self.slice}


class EvolutionRunTrigger(models.TextChoices):
    SLICE_CLOSE = "slice_close", _("slice close")
    EXPLICIT = "explicit", _("explicit request")
    MIGRATION = "migration", _("format migration")
    MANUAL = "manual", _("manual")
    FORGET = "forget", _("removed with a deleted line")  # D7: the person chose, or the line quoted it
    HAND = "hand_edit", _("edited by hand")  # K16: the person corrected the card
    CATCH_UP = "catch_up", _("catching up on history")  # H3: one slice of a catch-up, oldest first


class EvolutionRunStatus(models.TextChoices):
    QUEUED = "queued", _("queued")
    RUNNING = "running", _("running")
    CHANGED = "changed", _("changed")
    UNCHANGED = "unchanged", _("unchanged")
    SKIPPED = "skipped", _("skipped")
    FAILED = "failed", _("failed")


class EvolutionRun(models.Model):
    """One run of the Previously Agent over a card (K10, K11)."""

    Trigger = EvolutionRunTrigger

    Status = EvolutionRunStatus

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="evolution_runs", verbose_name=_("profile"))
    slice = models.ForeignKey(
        Slice, null=True, blank=True, on_delete=models.SET_NULL, related_name="evolution_runs", verbose_name=_("slice")
    )
    trigger = models.CharField(max_length=12, choices=Trigger.choices, verbose_name=_("trigger"))
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, verbose_name=_("status"))
    skip_reason = models.CharField(max_length=300, blank=True, verbose_name=_("skip reason"))
    summary = models.TextField(blank=True, verbose_name=_("summary"))
    diff = models.TextField(blank=True, verbose_name=_("diff"))
    # Each step: {"at", "kind": tool_call|refused|accepted|model|..., ...}; streamed live too.
    steps = models.JSONField(default=list, blank=True, verbose_name=_("steps"))
    model_name = models.CharField(max_length=200, blank=True, verbose_name=_("model name"))
    error = models.TextField(blank=True, verbose_name=_("error"))
    attempts = models.PositiveSmallIntegerField(default=0, verbose_name=_("attempts"))
    card_before = models.TextField(blank=True, verbose_name=_("card before"))
    card_after = models.TextField(blank=True, verbose_name=_("card after"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    started_at = models.DateTimeField(null=True, blank=True, verbose_name=_("started at"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished at"))

    class Meta:
        verbose_name = _("evolution run")
        verbose_name_plural = _("evolution runs")
        constraints = [
            choices_check("trigger", EvolutionRunTrigger, "evolution_trigger_valid"),
            choices_check("status", EvolutionRunStatus, "evolution_status_valid"),
        ]
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return gettext("card update %(pk)s (%(trigger)s, %(status)s)") % {
            "pk": self.pk, "trigger": self.get_trigger_display(), "status": self.get_status_display(),
        }
