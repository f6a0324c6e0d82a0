"""Shared pieces of the memory models."""

from django.db import models


def choices_check(field: str, choices: type[models.TextChoices], name: str) -> models.CheckConstraint:
    """A database check that `field` holds one of the enum's values."""
    return models.CheckConstraint(
        condition=models.Q(**{f"{field}__in": choices.values}), name=name
    )


class ProfileScopedQuerySet(models.QuerySet):
    def for_profile(self, profile):
        return self.filter(profile=profile)

    def live(self):
        """Rows not soft-deleted."""
        return self.filter(deleted_at__isnull=True)

    def soft_deleted(self):
        return self.filter(deleted_at__isnull=False)
