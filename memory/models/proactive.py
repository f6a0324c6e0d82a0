"""Messages the companion wrote first (SPEC K15): the per-profile, per-day count and the
occasions already announced."""

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from memory.models.archive import Message, Profile
from memory.models.base import choices_check


class ProactiveReason(models.TextChoices):
    HORIZON_DUE = "horizon_due", "a Horizon item fell due"
    RETURN = "return", "the user came back after a long gap"


class ProactiveSend(models.Model):
    """One proactive message. Rows per (profile, local day) are the day's count; `subject`
    names the occasion (a Horizon item at its due date, one return) so it is announced once,
    even when the check runs twice or in two processes. The row outlives a hard delete of its
    message (the message link is nulled), so a deleted reminder is not sent again."""

    Reason = ProactiveReason

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="proactive_sends", verbose_name=_("profile"))
    day = models.DateField(help_text=_("The user's local date when it was sent."), verbose_name=_("day"))
    reason = models.CharField(max_length=20, choices=Reason.choices, verbose_name=_("reason"))
    subject = models.CharField(max_length=300, verbose_name=_("subject"))
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="proactive_sends", verbose_name=_("message")
    )
    created_at = models.DateTimeField(default=timezone.now, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("proactive send")
        verbose_name_plural = _("proactive sends")
        constraints = [
            models.UniqueConstraint(fields=["profile", "subject"], name="proactive_unique_subject"),
            choices_check("reason", ProactiveReason, "proactive_reason_valid"),
        ]
        indexes = [models.Index(fields=["profile", "day"])]
        ordering = ["profile_id", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.profile} {self.day} {self.reason}: {self.subject}"
