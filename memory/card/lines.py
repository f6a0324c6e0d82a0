"""The card as a list of lines a person can point at (SPEC D7, K16).

Each item line (Identity, anchor fact, Now, Horizon, lesson) gets a `key` that names it by
section and content, so a confirmation page and the request that follows it agree on the
line even if the card moved in between (a key that no longer matches removes nothing).
"""

import hashlib
from dataclasses import dataclass, replace

from .format import Card, Refs, render

# (attribute on Card, section heading, 1-based index name used by the mutations)
SECTIONS = (
    ("identity", "Identity"),
    ("facts", "Past"),
    ("now", "Now"),
    ("horizon", "Horizon"),
    ("lessons", "Self-model"),
)


@dataclass(frozen=True)
class CardLine:
    attr: str  # identity, facts, now, horizon, lessons
    section: str  # the card's heading
    index: int  # 1-based, as the mutations count
    text: str  # the line as the card renders it (without "- ")
    words: str  # the line's own words (value or text), without refs and dates
    refs: Refs

    @property
    def key(self) -> str:
        return line_key(self.attr, self.text)


def line_key(attr: str, text: str) -> str:
    return f"{attr}:{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def _words(attr: str, item) -> str:
    return f"{item.field}: {item.value}" if attr == "identity" else item.text


def card_lines(card: Card) -> list[CardLine]:
    """Every item line of the card, in card order."""
    out: list[CardLine] = []
    for attr, section in SECTIONS:
        for n, item in enumerate(getattr(card, attr), 1):
            single = replace(Card(), **{attr: (item,)})
            text = next(
                line[2:] for line in render(single).split("\n") if line.startswith("- ")
            )
            out.append(CardLine(attr, section, n, text, _words(attr, item), tuple(item.refs)))
    return out


def without_lines(card: Card, keys: set[str]) -> tuple[Card, list[CardLine]]:
    """The card without the lines whose key is in `keys`, and the lines removed."""
    gone = [line for line in card_lines(card) if line.key in keys]
    return _rebuilt(card, gone, lambda item: None), gone


def _rebuilt(card: Card, lines: list[CardLine], change) -> Card:
    """The card with each item of `lines` replaced by `change(item)` (None drops it)."""
    changes = {}
    for attr, _ in SECTIONS:
        at = {line.index for line in lines if line.attr == attr}
        if at:
            items = (change(item) if n in at else item for n, item in enumerate(getattr(card, attr), 1))
            changes[attr] = tuple(item for item in items if item is not None)
    return replace(card, **changes) if changes else card


def citing_instead(card: Card, keys: set[str], dropped: set[str], ref: str) -> tuple[Card, list[CardLine]]:
    """The lines whose key is in `keys` citing `ref` instead of any ref in `dropped` (D7: a
    line the person keeps when its conversation is deleted cites them); and those lines."""
    lines = [line for line in card_lines(card) if line.key in keys]
    return _rebuilt(card, lines, lambda item: replace(
        item, refs=tuple(dict.fromkeys(ref if r in dropped else r for r in item.refs)))), lines
