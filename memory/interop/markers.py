"""Marker cleaning for legacy assistant replies (SPEC A5).

The old worker stored the assistant's raw output in `mem:` and the cleaned reply in
`msg:`; a fragment with no `msg:` twin is cleaned here the same way.
TODO(lead): when the live chat's marker cleaner lands, make this call it so both agree.
"""

import re

MARKER_RE = re.compile(r"\[\[[A-Za-z_]+:.*?\]\]", re.DOTALL)
_SPACES_RE = re.compile(r"\s+")


def clean_markers(text: str) -> str:
    """The reply as the user saw it: markers such as [[fav:...]] removed, ends trimmed."""
    if "[[" not in text:
        return text.strip()
    return MARKER_RE.sub("", text).strip()


def loose(text: str) -> str:
    """Whitespace-insensitive form, for matching a fragment with its msg: twin."""
    return _SPACES_RE.sub(" ", text).strip()
