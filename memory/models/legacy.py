"""What the legacy KV store had that has no row of its own elsewhere (LEGACY_KV.md)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from memory.models.archive import Message, Profile
from memory.models.base import choices_check


class LegacyFragmentDisposition(models.TextChoices):
    MERGED = "merged", "merged into its msg: record"
    OWN = "own", "became a message of its own"
    DUPLICATE = "duplicate", "duplicate of another fragment"
    SUPPRESSED = "suppressed", "suppressed by a msg tombstone"


class LegacyFragment(models.Model):
    """A raw `mem:`/`mem_` fragment, kept verbatim beside the message it became (X3, A6)."""

    Disposition = LegacyFragmentDisposition

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="legacy_fragments", verbose_name=_("profile"))
    key = models.CharField(max_length=300, verbose_name=_("key"))
    role = models.CharField(max_length=10, verbose_name=_("role"))
    content = models.TextField(blank=True, verbose_name=_("content"))
    ts = models.BigIntegerField(help_text=_("Epoch milliseconds, as stored."), verbose_name=_("ts"))
    day_key = models.CharField(max_length=10, blank=True, verbose_name=_("day key"))
    hour = models.SmallIntegerField(null=True, blank=True, verbose_name=_("hour"))
    period = models.CharField(max_length=16, blank=True, verbose_name=_("period"))
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="legacy_fragments", verbose_name=_("message")
    )
    disposition = models.CharField(max_length=10, choices=Disposition.choices, verbose_name=_("disposition"))
    # X2's raw-fragment fingerprint: content|ts.
    fingerprint = models.CharField(max_length=64, db_index=True, verbose_name=_("fingerprint"))
    legacy_extra = models.JSONField(default=dict, blank=True, verbose_name=_("legacy extra"))

    class Meta:
        verbose_name = _("legacy fragment")
        verbose_name_plural = _("legacy fragments")
        constraints = [
            models.UniqueConstraint(fields=["profile", "key"], name="legacy_fragment_unique_key"),
            choices_check("disposition", LegacyFragmentDisposition, "legacy_fragment_disposition_valid"),
        ]
        ordering = ["profile_id", "ts", "id"]

    def __str__(self) -> str:
        return self.key


class LegacyMeta(models.Model):
    """Any other `meta_*` key, kept verbatim (meta_lastTs, proactive counts, ...)."""

    profile = models.ForeignKey(
        Profile, null=True, blank=True, on_delete=models.CASCADE, related_name="legacy_meta", verbose_name=_("profile")
    )
    key = models.CharField(max_length=300, verbose_name=_("key"))
    value = models.TextField(blank=True, verbose_name=_("value"))
    expiration = models.BigIntegerField(null=True, blank=True, verbose_name=_("expiration"))
    metadata = models.JSONField(null=True, blank=True, verbose_name=_("metadata"))

    class Meta:
        verbose_name = _("legacy meta")
        constraints = [
            models.UniqueConstraint(fields=["profile", "key"], name="legacy_meta_unique_key"),
        ]
        ordering = ["key"]
        verbose_name_plural = _("legacy meta")

    def __str__(self) -> str:
        return self.key
