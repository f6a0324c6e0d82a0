"""Filters of the data page (templates/data/)."""

from django import template

from memory.interop.full.write import kind_shown

register = template.Library()


@register.filter
def import_kind(kind: str) -> str:
    """A kind of the full import's report ("legacy_fragments") in the interface language."""
    return kind_shown(kind)
