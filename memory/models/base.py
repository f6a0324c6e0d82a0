"""Shared pieces of the memory models."""

from django.db import models
from django.utils.translation import gettext_lazy as _


def choices_check(field: str, choices: type[models.TextChoices], name: str) -> models.CheckConstraint:
    """A database check that `field` holds one of the enum's values."""
    return models.CheckConstraint(
        condition=models.Q(**{f"{field}__in": choices.values}), name=name
    )


def flaggable_legacy_columns() -> tuple[models.Field, ...]:
    """The columns highlights, experiences and relations share, in this order:
    `deleted_at, reviewed_at, flagged, legacy_key, legacy_extra = flaggable_legacy_columns()`
    in the model's body (the fields are created there, so they keep their place among the others).

    - deleted_at: the soft delete (D1); null while live.
    - reviewed_at: D4, an admin reviewed this historic soft delete and kept it deleted ("keep").
    - flagged: non-empty when imported with a broken reference (LEGACY_KV 6); never used in recall.
    - legacy_key / legacy_extra: where the row came from in a legacy dump, and what it carried
      that has no column.
    """
    return (
        models.DateTimeField(null=True, blank=True, verbose_name=_("deleted at")),
        models.DateTimeField(null=True, blank=True, verbose_name=_("reviewed at")),
        models.CharField(max_length=200, blank=True, verbose_name=_("flagged")),
        models.CharField(max_length=300, blank=True, verbose_name=_("legacy key")),
        models.JSONField(default=dict, blank=True, verbose_name=_("legacy extra")),
    )


class ProfileScopedQuerySet(models.QuerySet):
    def for_profile(self, profile):
        return self.filter(profile=profile)

    def live(self):
        """Rows not soft-deleted."""
        return self.filter(deleted_at__isnull=True)

    def soft_deleted(self):
        return self.filter(deleted_at__isnull=False)
