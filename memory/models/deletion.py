"""Tombstones left by hard deletes (SPEC D2, D5)."""

from datetime import timedelta

from django.conf import settings
from django.db import connections, models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from memory.models.archive import Profile
from memory.models.base import choices_check


def tombstone_expiry(deleted_at):
    return deleted_at + timedelta(days=settings.PREVIOUSLY_TOMBSTONE_TTL_DAYS)


class TombstoneQuerySet(models.QuerySet):
    def for_profile(self, profile):
        return self.filter(profile=profile)

    def in_force(self, now=None):
        """Not yet expired: these block re-import."""
        return self.filter(expires_at__gt=now or timezone.now())

    def expired(self, now=None):
        return self.filter(expires_at__lte=now or timezone.now())

    def line_deleted(self, profile_id: int, mid: str, *, lock_profile: bool = False) -> bool:
        """`filter(profile=p, kind=MESSAGE, object_id=mid).exists()`: the line `mid` was deleted
        for good (D2) and is not stored again. `lock_profile`: also take the profile's row lock
        serialising its writers, in the same round trip (the archive write, PostgreSQL; SQLite's
        IMMEDIATE transaction already serialises them): one plain query on the turn's write path,
        not two ORM ones (BENCH §4)."""
        conn = connections[self.db]
        lock = " FOR UPDATE" if lock_profile and conn.features.has_select_for_update else ""
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM memory_tombstone WHERE profile_id = %s AND kind = %s AND object_id = %s)"
                " FROM memory_profile WHERE id = %s" + lock,
                [profile_id, TombstoneKind.MESSAGE, mid, profile_id],
            )
            row = cursor.fetchone()
        return bool(row and row[0])


class TombstoneKind(models.TextChoices):
    MESSAGE = "msg", "message"
    HIGHLIGHT = "hl", "highlight"
    EXPERIENCE = "exp", "experience"
    RELATION = "rel", "relation"
    FRAGMENT = "mem", "raw fragment"


class Tombstone(models.Model):
    """Marks a hard-deleted record; blocks its re-import until it expires."""

    Kind = TombstoneKind

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="tombstones", verbose_name=_("profile"))
    kind = models.CharField(max_length=3, choices=Kind.choices, verbose_name=_("kind"))
    object_id = models.CharField(max_length=128, verbose_name=_("object id"))
    deleted_at = models.DateTimeField(verbose_name=_("deleted at"))
    expires_at = models.DateTimeField(verbose_name=_("expires at"))
    content_hash = models.CharField(max_length=8, blank=True, verbose_name=_("content hash"))
    # The deleted record's own creation time (a msg tombstone carries it in legacy data).
    created_at = models.DateTimeField(null=True, blank=True, verbose_name=_("created at"))
    legacy_key = models.CharField(max_length=300, blank=True, verbose_name=_("legacy key"))
    legacy_extra = models.JSONField(default=dict, blank=True, verbose_name=_("legacy extra"))

    objects = TombstoneQuerySet.as_manager()

    class Meta:
        verbose_name = _("tombstone")
        verbose_name_plural = _("tombstones")
        constraints = [
            models.UniqueConstraint(
                fields=["profile", "kind", "object_id"], name="tombstone_unique_per_record"
            ),
            choices_check("kind", TombstoneKind, "tombstone_kind_valid"),
            models.CheckConstraint(
                condition=models.Q(expires_at__gt=models.F("deleted_at")),
                name="tombstone_expires_after_deletion",
            ),
        ]
        indexes = [models.Index(fields=["profile", "content_hash"])]
        ordering = ["-deleted_at", "id"]

    def __str__(self) -> str:
        return f"tomb:{self.profile.key}:{self.kind}:{self.object_id}"

    def save(self, *args, **kwargs):
        if self.expires_at is None and self.deleted_at is not None:
            self.expires_at = tombstone_expiry(self.deleted_at)
        super().save(*args, **kwargs)
