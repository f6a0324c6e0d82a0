"""Check a card text against the format (K1) and every limit (K2), with line numbers.

A parse error stops the check at its line (the rest cannot be read reliably); a card that
parses is checked for every limit, each violation reported on the line it concerns.
"""

from dataclasses import dataclass
from datetime import date

from . import limits
from .flags import flags
from .format import Card, CardFormatError, parse


@dataclass(frozen=True)
class Violation:
    line: int | None
    problem: str
    severity: str = "error"  # "error" breaks K1/K2; "warning" is a K5/K6 flag for the agent

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "card"
        return f"{where}: {self.severity}: {self.problem}"


def violations(text: str, *, today: date | None = None) -> list[Violation]:
    """Every format and limit violation of `text`; with `today`, stale/overdue flags too."""
    try:
        card = parse(text)
    except CardFormatError as exc:
        return [Violation(exc.line, exc.problem)]
    lines = text.split("\n")
    found: list[Violation] = []

    def line_of(section: str, prefix: str) -> int | None:
        start = next((k for k, line in enumerate(lines) if line == f"## {section}"), 0)
        for k in range(start, len(lines)):
            if lines[k].startswith(prefix):
                return k + 1
        return None

    def section_line(section: str) -> int | None:
        return next((k + 1 for k, line in enumerate(lines) if line == f"## {section}"), None)

    def count(section: str, items, cap: int, what: str) -> None:
        if len(items) > cap:
            found.append(Violation(section_line(section), f"{section} has {len(items)} {what}, limit {cap}"))

    count("Identity", card.identity, limits.IDENTITY_MAX_LINES, "lines")
    count("Past", card.facts, limits.ANCHOR_FACTS_MAX, "anchor facts")
    count("Now", card.now, limits.NOW_MAX, "items")
    count("Horizon", card.horizon, limits.HORIZON_MAX, "items")
    count("Self-model", card.lessons, limits.LESSONS_MAX, "lessons")
    if len(card.portrait) > limits.PORTRAIT_MAX_CHARS:
        found.append(
            Violation(
                (section_line("Past") or 0) + 2,
                f"portrait is {len(card.portrait)} chars, limit {limits.PORTRAIT_MAX_CHARS}",
            )
        )
    for section, items in _items(card):
        for k, (text_, refs, needs_refs) in enumerate(items, 1):
            where = line_of(section, f"- {text_}")
            if len(text_) > limits.ITEM_MAX_CHARS:
                found.append(Violation(where, f"{section} {k} is {len(text_)} chars, limit {limits.ITEM_MAX_CHARS}"))
            if needs_refs and not refs:
                found.append(Violation(where, f"{section} {k} has no evidence refs"))
            if len(refs) > limits.REFS_MAX_PER_ITEM:
                found.append(Violation(where, f"{section} {k} has {len(refs)} refs, limit {limits.REFS_MAX_PER_ITEM}"))
    if today is not None:
        for flag in flags(card, today=today):
            item = (card.now if flag.section == "Now" else card.horizon)[flag.index - 1]
            found.append(Violation(line_of(flag.section, f"- {item.text}"), flag.message, "warning"))
    return sorted(found, key=lambda v: (v.line or 0))


def _items(card: Card):
    yield "Identity", [(f"{i.field}: {i.value}", i.refs, False) for i in card.identity]
    yield "Past", [(f.text, f.refs, True) for f in card.facts]
    yield "Now", [(n.text, n.refs, True) for n in card.now]
    yield "Horizon", [(h.text, h.refs, True) for h in card.horizon]
    yield "Self-model", [(x.text, x.refs, True) for x in card.lessons]
