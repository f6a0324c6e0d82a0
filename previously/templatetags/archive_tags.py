"""Template filters of the archive: search terms marked in a line, safely escaped."""

import re

from django import template
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from memory.clock import zone_named

register = template.Library()

WINDOW = 320  # characters of a long line shown around its first match


@register.filter
def mark_terms(text: str, query: str) -> str:
    """`text` escaped, with each whitespace-separated word of `query` wrapped in <mark>."""
    text = text or ""
    words = sorted({w for w in (query or "").split() if w}, key=len, reverse=True)[:20]
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE) if words else None
    spans = [m.span() for m in pattern.finditer(text)] if pattern else []
    start = 0
    if len(text) > WINDOW:
        first = spans[0][0] if spans else 0
        start = max(0, min(first - WINDOW // 3, len(text) - WINDOW))
    end = min(len(text), start + WINDOW)
    out, at = [], start
    for a, b in spans:
        if a < at or b > end:
            continue
        out.append(escape(text[at:a]))
        out.append(f"<mark>{escape(text[a:b])}</mark>")
        at = b
    out.append(escape(text[at:end]))
    return mark_safe(("…" if start else "") + "".join(out) + ("…" if end < len(text) else ""))


@register.filter
def local_hm(moment, tz: str) -> str:
    """A moment on the user's clock in `tz` (a slice's zone, the clock that named it), else in
    the person's zone (the request's active one), as 'YYYY-MM-DD HH:MM'."""
    if moment is None:
        return ""
    return moment.astimezone(zone_named(tz) or timezone.get_current_timezone()).strftime("%Y-%m-%d %H:%M")
