"""The v5 user card (K1): dataclasses, ``parse`` and ``render``, byte-exact round trip.

The layout is the seed's "v5 format". Its example header reads ``Format: user card v2``
although the document calls the layout v5; both labels name the same layout and both
parse. Cards we stamp carry ``CURRENT_FORMAT`` ("user card v5"); a parsed card keeps the
label it was written with, so parse/render stay byte-exact.

Canonical text (what ``render`` writes, and the only text ``parse`` accepts)::

    # Previously On
    <blank>
    _Active slice: 2026-08-17-0515 | Format: user card v5 | Updated: 2026-08-17T05:27:48Z_
    <blank>
    ## Identity            - Field: value[ — refs: [YYYY/MM/DD/HHMM], …]
    ## Past                portrait paragraph (may wrap over lines), then
                           - fact — refs: [YYYY/MM/DD/HHMM], …
    ## Now                 - text — refs: […] | since: YYYY-MM-DD
    ## Horizon             - text — by: YYYY-MM-DD — refs: […]
    ## Self-model          - lesson — refs: […]

Blocks are separated by one blank line and the text ends with one newline. ``parse``
refuses anything else with a ``CardFormatError`` naming the line, rather than
guessing: a card is never silently normalised or cut.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Literal

TITLE = "# Previously On"
CURRENT_FORMAT = "user card v5"
# The seed's example labels the v5 layout "user card v2"; it is the same layout.
ACCEPTED_FORMATS = (CURRENT_FORMAT, "user card v2")
SECTIONS = ("Identity", "Past", "Now", "Horizon", "Self-model")
NO_SLICE = "none"  # header value of a card that has never been evolved
NEVER = "never"

REF_SHAPE = "YYYY/MM/DD/HHMM"
# K16: a line the person wrote by hand cites them, "[you]", instead of a slice. Only the card
# page's resolver accepts it; the agent's resolves refs to slices, so it cannot claim it.
PERSON_REF = "you"
_REF_RE = re.compile(r"\d{4}/\d{2}/\d{2}/\d{4}")
_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SLICE_RE = re.compile(r"\d{4}-\d{2}-\d{2}-\d{4}")
_UPDATED_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_UPDATED_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

_HEADER_RE = re.compile(
    r"_Active slice: (?P<slice>.*?) \| Format: (?P<format>.*?) \| Updated: (?P<updated>.*?)_"
)
_HEADING_RE = re.compile(r"#{1,6} ")
_REFS = r"(?P<refs>\[[^\[\]]*\](?:, \[[^\[\]]*\])*)"
# Greedy text: the structural suffix is always the *last* one on the line, so item text
# may itself contain " — ", " | " or even " — refs: " without confusing the parser.
_IDENTITY_RE = re.compile(r"- (?P<field>[^:]+): (?P<value>.+?)(?: — refs: " + _REFS + ")?")
_FACT_RE = re.compile(r"- (?P<text>.+) — refs: " + _REFS)
_NOW_RE = re.compile(r"- (?P<text>.+) — refs: " + _REFS + r" \| since: (?P<since>\S+)")
_HORIZON_RE = re.compile(r"- (?P<text>.+) — by: (?P<by>\S+) — refs: " + _REFS)

Refs = tuple[str, ...]


class CardFormatError(ValueError):
    """The text is not a canonical v5 card; ``line`` is 1-based (None: the whole text)."""

    def __init__(self, problem: str, *, line: int | None = None) -> None:
        self.line = line
        self.problem = problem
        super().__init__(f"line {line}: {problem}" if line else problem)


@dataclass(frozen=True)
class Header:
    active_slice: str = NO_SLICE
    format: str = CURRENT_FORMAT
    updated: str = NEVER


@dataclass(frozen=True)
class IdentityLine:
    field: str
    value: str
    refs: Refs = ()  # optional here only: the seed's hand-written identity lines have none


@dataclass(frozen=True)
class Fact:
    text: str
    refs: Refs


@dataclass(frozen=True)
class NowItem:
    text: str
    refs: Refs
    since: date


@dataclass(frozen=True)
class HorizonItem:
    text: str
    by: date
    refs: Refs


@dataclass(frozen=True)
class Lesson:
    text: str
    refs: Refs


@dataclass(frozen=True)
class Card:
    """One profile's card; immutable, so a mutation can only ever return a new one."""

    header: Header = Header()
    identity: tuple[IdentityLine, ...] = ()
    portrait: str = ""
    facts: tuple[Fact, ...] = ()  # the Past section's anchor facts
    now: tuple[NowItem, ...] = ()
    horizon: tuple[HorizonItem, ...] = ()
    lessons: tuple[Lesson, ...] = ()  # the Self-model section


def empty_card() -> Card:
    """The card an empty profile starts from."""
    return Card()


def stamp(card: Card, *, active_slice: str, at: datetime) -> Card:
    """Return the card with a fresh header (current format label), ready to store."""
    if not is_slice_id(active_slice):
        raise ValueError(f"active slice {active_slice!r} is not YYYY-MM-DD-HHMM")
    if at.tzinfo is None:
        raise ValueError("stamp needs an aware datetime")
    updated = at.astimezone(UTC).strftime(_UPDATED_FORMAT)
    return replace(card, header=Header(active_slice, CURRENT_FORMAT, updated))


# --- small validators shared with mutations -------------------------------------------


def is_ref(ref: object) -> bool:
    """True for a real local time written YYYY/MM/DD/HHMM (a slice id with slashes), or the
    person's own ref `[you]` (K16)."""
    if ref == PERSON_REF:
        return True
    return (
        isinstance(ref, str)
        and _REF_RE.fullmatch(ref) is not None
        and _valid_time(ref, "%Y/%m/%d/%H%M")
    )


def is_slice_id(value: str) -> bool:
    """True for a slice id YYYY-MM-DD-HHMM."""
    return _SLICE_RE.fullmatch(value) is not None and _valid_time(value, "%Y-%m-%d-%H%M")


def parse_day(value: object) -> date | None:
    """The date of a strict YYYY-MM-DD string, else None."""
    if not isinstance(value, str) or _DAY_RE.fullmatch(value) is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def _valid_time(value: str, pattern: str) -> bool:
    try:
        datetime.strptime(value, pattern)
    except ValueError:
        return False
    return True


# --- render ---------------------------------------------------------------------------


def render(card: Card) -> str:
    """The card's canonical Markdown text."""
    return render_with(card, ref=lambda r: f"[{r}]", day=date.isoformat, updated=str)


def render_with(
    card: Card,
    *,
    ref: Callable[[str], str],
    day: Callable[[date], str],
    updated: Callable[[str], str],
    deadline: Callable[[date], str] | None = None,
) -> str:
    """Render with custom formatting of refs, dates and the Updated stamp (see inject)."""
    by = deadline or day

    def refs(values: Refs) -> str:
        return ", ".join(ref(r) for r in values)

    h = card.header
    blocks = [
        TITLE,
        f"_Active slice: {h.active_slice} | Format: {h.format} | Updated: {updated(h.updated)}_",
    ]

    def section(name: str, *bodies: str) -> None:
        blocks.append(f"## {name}")
        blocks.extend(b for b in bodies if b)

    section(
        "Identity",
        "\n".join(
            f"- {i.field}: {i.value}" + (f" — refs: {refs(i.refs)}" if i.refs else "")
            for i in card.identity
        ),
    )
    section(
        "Past",
        card.portrait,
        "\n".join(f"- {f.text} — refs: {refs(f.refs)}" for f in card.facts),
    )
    section(
        "Now",
        "\n".join(f"- {n.text} — refs: {refs(n.refs)} | since: {day(n.since)}" for n in card.now),
    )
    section(
        "Horizon",
        "\n".join(f"- {h.text} — by: {by(h.by)} — refs: {refs(h.refs)}" for h in card.horizon),
    )
    section("Self-model", "\n".join(f"- {x.text} — refs: {refs(x.refs)}" for x in card.lessons))
    return "\n\n".join(blocks) + "\n"


# --- parse ----------------------------------------------------------------------------


def parse(text: str) -> Card:
    """Parse a canonical v5 card; raise CardFormatError (with the line) on anything else."""
    if not text.strip():
        raise CardFormatError("the card is empty — start from empty_card()")
    lines = text.split("\n")
    if lines[0] != TITLE:
        raise CardFormatError(f"expected the title {TITLE!r}, found {lines[0]!r}", line=1)

    headings = [(n, line) for n, line in enumerate(lines, 1) if _HEADING_RE.match(line) and n > 1]
    _check_sections(headings)
    preamble = [(n, lines[n - 1]) for n in range(2, headings[0][0]) if lines[n - 1]]
    header = _parse_header(preamble)

    bodies: dict[str, list[tuple[int, str]]] = {}
    for k, (start, line) in enumerate(headings):
        end = headings[k + 1][0] if k + 1 < len(headings) else len(lines) + 1
        bodies[line[3:]] = [(n, lines[n - 1]) for n in range(start + 1, end)]

    portrait, facts = _parse_past(bodies["Past"])
    card = Card(
        header=header,
        identity=tuple(_items(bodies["Identity"], _identity_line)),
        portrait=portrait,
        facts=facts,
        now=tuple(_items(bodies["Now"], _now_item)),
        horizon=tuple(_items(bodies["Horizon"], _horizon_item)),
        lessons=tuple(_items(bodies["Self-model"], _lesson)),
    )
    _check_canonical(text, render(card))
    return card


def detect_format(text: str) -> Literal["empty", "v5", "legacy"]:
    """Classify stored card text; anything but "v5" forces an evolution run (K10)."""
    if not text.strip():
        return "empty"
    try:
        parse(text)
    except CardFormatError:
        return "legacy"
    return "v5"


def _check_sections(headings: list[tuple[int, str]]) -> None:
    expected = ", ".join(f"## {s}" for s in SECTIONS)
    for n, line in headings:
        if not line.startswith("## ") or line[3:] not in SECTIONS:
            raise CardFormatError(
                f"unexpected heading {line!r} — a v5 card has exactly {expected}, in order",
                line=n,
            )
    found = [line[3:] for _, line in headings]
    if found != list(SECTIONS):
        raise CardFormatError(
            f"sections are {', '.join(found) or 'missing'} — a v5 card has exactly {expected},"
            " in order"
        )


def _parse_header(preamble: list[tuple[int, str]]) -> Header:
    if not preamble:
        raise CardFormatError("the header line '_Active slice: … | Updated: …_' is missing")
    n, line = preamble[0]
    if len(preamble) > 1:
        raise CardFormatError(
            f"unexpected text before ## Identity: {preamble[1][1]!r}", line=preamble[1][0]
        )
    m = _HEADER_RE.fullmatch(line)
    if m is None:
        raise CardFormatError(
            f"expected the header '_Active slice: … | Format: … | Updated: …_', found {line!r}",
            line=n,
        )
    if m["slice"] != NO_SLICE and not is_slice_id(m["slice"]):
        raise CardFormatError(f"active slice {m['slice']!r} is not YYYY-MM-DD-HHMM", line=n)
    if m["format"] not in ACCEPTED_FORMATS:
        raise CardFormatError(
            f"format {m['format']!r} is not the v5 layout ({' or '.join(ACCEPTED_FORMATS)})",
            line=n,
        )
    if m["updated"] != NEVER and not (
        _UPDATED_RE.fullmatch(m["updated"]) and _valid_time(m["updated"], _UPDATED_FORMAT)
    ):
        raise CardFormatError(f"updated {m['updated']!r} is not YYYY-MM-DDTHH:MM:SSZ", line=n)
    return Header(m["slice"], m["format"], m["updated"])


def _parse_past(body: list[tuple[int, str]]) -> tuple[str, tuple[Fact, ...]]:
    blocks: list[list[tuple[int, str]]] = [[]]
    for n, line in body:
        if line:
            blocks[-1].append((n, line))
        elif blocks[-1]:
            blocks.append([])
    blocks = [b for b in blocks if b]
    portrait = ""
    facts: list[Fact] = []
    for k, block in enumerate(blocks):
        if all(line.startswith("- ") for _, line in block):
            facts.extend(_items(block, _fact))
        elif any(line.startswith("- ") for _, line in block):
            n = next(
                n for n, line in block if line.startswith("- ") != block[0][1].startswith("- ")
            )
            raise CardFormatError(
                "the portrait paragraph and the anchor-fact list must be separated by a blank line",
                line=n,
            )
        elif k == 0:
            portrait = "\n".join(line for _, line in block)
        else:
            raise CardFormatError(
                "## Past holds one portrait paragraph, then the anchor facts", line=block[0][0]
            )
    return portrait, tuple(facts)


def _items[T](body: list[tuple[int, str]], make: Callable[[int, str], T]) -> list[T]:
    return [make(n, line) for n, line in body if line]


def _match(pattern: re.Pattern[str], n: int, line: str, shape: str) -> re.Match[str]:
    m = pattern.fullmatch(line)
    if m is None:
        raise CardFormatError(f"expected {shape!r}, found {line!r}", line=n)
    return m


def _refs(n: int, raw: str | None) -> Refs:
    if raw is None:
        return ()
    refs = tuple(r.strip("[]") for r in raw.split(", "))
    for r in refs:
        if not is_ref(r):
            raise CardFormatError(f"ref [{r}] is not a valid {REF_SHAPE}", line=n)
    return refs


def _day(n: int, raw: str, what: str) -> date:
    day = parse_day(raw)
    if day is None:
        raise CardFormatError(f"{what} {raw!r} is not a valid YYYY-MM-DD date", line=n)
    return day


def _identity_line(n: int, line: str) -> IdentityLine:
    m = _match(_IDENTITY_RE, n, line, "- Field: value — refs: [YYYY/MM/DD/HHMM]")
    return IdentityLine(m["field"], m["value"], _refs(n, m["refs"]))


def _fact(n: int, line: str) -> Fact:
    m = _match(_FACT_RE, n, line, "- fact — refs: [YYYY/MM/DD/HHMM]")
    return Fact(m["text"], _refs(n, m["refs"]))


def _now_item(n: int, line: str) -> NowItem:
    m = _match(_NOW_RE, n, line, "- text — refs: [YYYY/MM/DD/HHMM] | since: YYYY-MM-DD")
    return NowItem(m["text"], _refs(n, m["refs"]), _day(n, m["since"], "since"))


def _horizon_item(n: int, line: str) -> HorizonItem:
    m = _match(_HORIZON_RE, n, line, "- text — by: YYYY-MM-DD — refs: [YYYY/MM/DD/HHMM]")
    return HorizonItem(m["text"], _day(n, m["by"], "by"), _refs(n, m["refs"]))


def _lesson(n: int, line: str) -> Lesson:
    m = _match(_FACT_RE, n, line, "- lesson — refs: [YYYY/MM/DD/HHMM]")
    return Lesson(m["text"], _refs(n, m["refs"]))


def _check_canonical(text: str, canonical: str) -> None:
    # The guarantee behind byte-exact round trips: whatever the structural parse
    # tolerated (spacing, blank lines, a missing final newline) is refused here.
    if text == canonical:
        return
    got, want = text.split("\n"), canonical.split("\n")
    for n, (g, w) in enumerate(zip(got, want, strict=False), 1):
        if g != w:
            raise CardFormatError(
                f"not in canonical v5 layout — expected {w!r}, found {g!r}", line=n
            )
    if len(got) < len(want):
        raise CardFormatError("the card must end with exactly one newline", line=len(got))
    raise CardFormatError(
        "the card must end with exactly one newline (found extra lines at the end)",
        line=len(want),
    )
