"""K7: a card is written back only when its substance changed."""

import re

from .format import Card, render

# Only the header's Updated stamp is ignored: it is refreshed on every write. Everything
# else — the active slice, the format label, every section — is substance.
_UPDATED_RE = re.compile(r"^(_Active slice: .*? \| Format: .*? \| Updated: ).*?(_)$", re.MULTILINE)


def same_substance(a: str | Card, b: str | Card) -> bool:
    """True when two cards differ at most in the header's Updated timestamp."""
    return _without_stamp(a) == _without_stamp(b)


def _without_stamp(card: str | Card) -> str:
    text = render(card) if isinstance(card, Card) else card
    return _UPDATED_RE.sub(r"\1…\2", text, count=1)
