"""Template filters of the login pages."""

from datetime import timedelta

from django import template

register = template.Library()


@register.filter
def minutes(delta: timedelta | None) -> int:
    """A lock-out's length in whole minutes (at least 1)."""
    return max(1, round(delta.total_seconds() / 60)) if delta else 1
