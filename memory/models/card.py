"""The "Previously On" card: live card, per-slice snapshots, evolution runs (SPEC K)."""

from django.db import models

from memory.models.archive import Profile, Slice
from memory.models.base import choices_check


class Card(models.Model):
    """The live card of a profile (K1); `version` guards concurrent writers (K8)."""

    profile = models.OneToOneField(Profile, on_delete=models.CASCADE, related_name="card")
    text = models.TextField(blank=True)
    format = models.CharField(max_length=16, default="v5")
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(version__gte=0), name="card_version_positive")
        ]

    def __str__(self) -> str:
        return f"card of {self.profile} v{self.version}"


class CardSnapshot(models.Model):
    """The card as it was when a slice ended (K8, K12)."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="card_snapshots")
    slice = models.OneToOneField(Slice, on_delete=models.CASCADE, related_name="card_snapshot")
    text = models.TextField(blank=True)
    card_version = models.PositiveIntegerField(default=0)
    run = models.ForeignKey(
        "EvolutionRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="snapshots"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"card at {self.slice}"


class EvolutionRunTrigger(models.TextChoices):
    SLICE_CLOSE = "slice_close", "slice close"
    EXPLICIT = "explicit", "explicit request"
    MIGRATION = "migration", "format migration"
    MANUAL = "manual", "manual"


class EvolutionRunStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    CHANGED = "changed", "changed"
    UNCHANGED = "unchanged", "unchanged"
    SKIPPED = "skipped", "skipped"
    FAILED = "failed", "failed"


class EvolutionRun(models.Model):
    """One run of the Previously Agent over a card (K10, K11)."""

    Trigger = EvolutionRunTrigger

    Status = EvolutionRunStatus

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="evolution_runs")
    slice = models.ForeignKey(
        Slice, null=True, blank=True, on_delete=models.SET_NULL, related_name="evolution_runs"
    )
    trigger = models.CharField(max_length=12, choices=Trigger.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    skip_reason = models.CharField(max_length=300, blank=True)
    summary = models.TextField(blank=True)
    diff = models.TextField(blank=True)
    # Each step: {"at", "kind": tool_call|refused|accepted|model|..., ...}; streamed live too.
    steps = models.JSONField(default=list, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    card_before = models.TextField(blank=True)
    card_after = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            choices_check("trigger", EvolutionRunTrigger, "evolution_trigger_valid"),
            choices_check("status", EvolutionRunStatus, "evolution_status_valid"),
        ]
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"run {self.pk} {self.trigger} {self.status}"
