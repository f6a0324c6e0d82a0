"""Validated mutations of the card, one per agent tool (K3).

Each function takes the current ``Card`` and the tool's arguments (keyword-only, named
exactly as the tool's), validates them *inside* and returns a ``MutationResult``. An
accepted mutation returns a new card that differs only in what it names; a refused one
returns the same card object and a message a model can act on, with the numbers
("portrait is 2630 chars, limit 2400 — compress and retry").

Conventions a caller must know:

- ``index`` is 1-based, as a person or a model counts the items on the card.
- ``refs`` is a list of ``YYYY/MM/DD/HHMM`` strings (no brackets). They must resolve
  through ``refs_exist``: a callable given the refs that returns the set of those that
  do *not* exist among the profile's slices (empty set: all exist).
- Dates (``since``, ``by``) are ``YYYY-MM-DD`` strings.
"""

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from . import limits
from .directives import cites_user_override, conflicting_directive
from .format import (
    REF_SHAPE,
    Card,
    Fact,
    HorizonItem,
    IdentityLine,
    Lesson,
    NowItem,
    Refs,
    is_ref,
    parse_day,
)

RefsResolver = Callable[[Sequence[str]], AbstractSet[str]]
"""Given refs, return the ones missing from the profile's slices."""


@dataclass(frozen=True)
class MutationResult:
    accepted: bool
    message: str
    card: Card  # the new card, or the unchanged input when refused


class _Refused(Exception):
    pass


def resolver_from(existing: AbstractSet[str]) -> RefsResolver:
    """A resolver over a known set of refs (tests, or a caller that preloaded slice ids)."""
    return lambda refs: {r for r in refs if r not in existing}


def _mutation(fn: Callable[..., MutationResult]) -> Callable[..., MutationResult]:
    # Validation raises _Refused anywhere inside; the caller always gets a result and
    # the card it passed in, untouched.
    @functools.wraps(fn)
    def wrapper(card: Card, **kwargs: Any) -> MutationResult:
        try:
            return fn(card, **kwargs)
        except _Refused as refusal:
            return MutationResult(False, str(refusal), card)

    return wrapper


def _ok(card: Card, message: str) -> MutationResult:
    return MutationResult(True, message, card)


# --- argument validation --------------------------------------------------------------


def _text(value: object, *, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise _Refused(f"{what} must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise _Refused(f"{what} is empty — write it and retry")
    if "\n" in text or "\r" in text:
        raise _Refused(f"{what} must be one line — remove the line breaks and retry")
    if len(text) > limit:
        raise _Refused(f"{what} is {len(text)} chars, limit {limit} — compress and retry")
    return text


def _ref_list(value: object) -> Refs:
    if isinstance(value, str):
        raise _Refused(
            f"refs must be a list of {REF_SHAPE} strings, e.g. ['2026/08/11/1426']"
            f" — got the single string {value!r}"
        )
    if not isinstance(value, list | tuple):
        raise _Refused(f"refs must be a list of {REF_SHAPE} strings, got {type(value).__name__}")
    if not value:
        raise _Refused(
            f"refs are required — cite at least one slice as {REF_SHAPE} (no evidence, no write)"
        )
    for ref in value:
        if not is_ref(ref):
            raise _Refused(f"ref {ref!r} is not a valid {REF_SHAPE}, e.g. '2026/08/11/1426'")
    refs = tuple(dict.fromkeys(value))  # a repeated ref is the same evidence
    if len(refs) > limits.REFS_MAX_PER_ITEM:
        raise _Refused(
            f"{len(refs)} refs, limit {limits.REFS_MAX_PER_ITEM} per item"
            " — cite the strongest evidence"
        )
    return refs


def _resolve(refs: Refs, refs_exist: RefsResolver) -> None:
    missing = set(refs_exist(refs))
    if missing:
        listed = ", ".join(f"[{r}]" for r in refs if r in missing)
        raise _Refused(
            f"refs not found among this profile's slices: {listed}"
            " — cite slices that exist (read_slice to check)"
        )


def _day(value: object, *, what: str) -> date:
    day = parse_day(value)
    if day is None:
        raise _Refused(f"{what} {value!r} is not a date YYYY-MM-DD, e.g. '2026-08-21'")
    return day


def _index(value: object, items: Sequence[object], *, section: str) -> int:
    """The 0-based position of a 1-based tool index."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Refused(f"index must be a whole number, got {value!r}")
    count = len(items)
    if count == 0:
        raise _Refused(f"{section} is empty — there is no item {value}")
    if not 1 <= value <= count:
        valid = "1" if count == 1 else f"1–{count}"
        raise _Refused(
            f"index {value} is out of range — {section} has {count}"
            f" item{'s' if count != 1 else ''} (valid: {valid})"
        )
    return value - 1


def _capacity(items: Sequence[object], limit: int, full: str) -> None:
    if len(items) >= limit:
        raise _Refused(full.format(n=len(items), limit=limit))


def _not_duplicate(text: str, existing: Sequence[str], *, what: str) -> None:
    key = text.casefold()
    for k, other in enumerate(existing, 1):
        if other.casefold() == key:
            raise _Refused(f"{what} {k} already says this — nothing added")


def _drop(items: tuple, position: int) -> tuple:
    return items[:position] + items[position + 1 :]


# --- Identity -------------------------------------------------------------------------


@_mutation
def set_identity(
    card: Card, *, field: object, value: object, refs: object, refs_exist: RefsResolver
) -> MutationResult:
    """Set (or, with an empty value, clear) one Identity line, in place."""
    name = _text(field, what="identity field", limit=limits.IDENTITY_FIELD_MAX_CHARS)
    if ":" in name:
        raise _Refused(
            f"identity field {name!r} must not contain ':' — e.g. 'Name',"
            " 'Address them as', 'Pronouns', 'Alias'"
        )
    clearing = isinstance(value, str) and not value.strip()
    text = (
        ""
        if clearing
        else _text(value, what=f"identity {name!r}", limit=limits.IDENTITY_VALUE_MAX_CHARS)
    )
    if " — refs: " in text:
        raise _Refused(f"identity {name!r} must not contain ' — refs: ' — pass evidence in refs")
    evidence = _ref_list(refs)
    lines = card.identity
    position = next(
        (k for k, line in enumerate(lines) if line.field.casefold() == name.casefold()), None
    )
    cap = limits.IDENTITY_MAX_LINES
    if clearing:
        if position is None:
            raise _Refused(f"Identity has no {name!r} line — nothing to clear")
        _resolve(evidence, refs_exist)
        kept = _drop(lines, position)
        return _ok(
            replace(card, identity=kept), f"Identity {name!r} cleared ({len(kept)}/{cap} lines)"
        )
    new = IdentityLine(name, text, evidence)
    if position is None:
        _capacity(
            lines,
            cap,
            "Identity has {n}/{limit} lines — change an existing field or"
            " clear one (empty value) first",
        )
        _resolve(evidence, refs_exist)
        updated = (*lines, new)
    else:
        if lines[position] == new:
            return _ok(card, f"Identity {name!r} already is {text!r} — nothing changed")
        _resolve(evidence, refs_exist)
        updated = (*lines[:position], new, *lines[position + 1 :])
    return _ok(
        replace(card, identity=updated),
        f"Identity {name!r} set to {text!r} ({len(updated)}/{cap} lines)",
    )


# --- Past -----------------------------------------------------------------------------


@_mutation
def set_portrait(card: Card, *, text: object) -> MutationResult:
    """Rewrite the Past portrait paragraph (third person, one paragraph)."""
    if not isinstance(text, str):
        raise _Refused(f"portrait must be a string, got {type(text).__name__}")
    # Line endings and trailing spaces are invisible; normalising them keeps the stored
    # card canonical without touching a word of the content.
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    portrait = "\n".join(lines).strip()
    if not portrait:
        raise _Refused("portrait is empty — write the third-person paragraph and retry")
    for k, line in enumerate(portrait.split("\n"), 1):
        if not line.strip():
            raise _Refused(
                f"portrait must be one paragraph — line {k} is blank; join the paragraphs and retry"
            )
        if line.startswith("- "):
            raise _Refused(
                f"portrait line {k} starts with '- ' and would read as an anchor"
                " fact — reword it, or use add_anchor_fact"
            )
        if line.startswith("#"):
            raise _Refused(
                f"portrait line {k} starts with '#' and would read as a heading — reword it"
            )
    cap = limits.PORTRAIT_MAX_CHARS
    if len(portrait) > cap:
        raise _Refused(f"portrait is {len(portrait)} chars, limit {cap} — compress and retry")
    if portrait == card.portrait:
        return _ok(card, f"portrait unchanged ({len(portrait)}/{cap} chars)")
    return _ok(replace(card, portrait=portrait), f"portrait set ({len(portrait)}/{cap} chars)")


@_mutation
def add_anchor_fact(
    card: Card, *, text: object, refs: object, refs_exist: RefsResolver
) -> MutationResult:
    """Append an anchor fact to Past."""
    fact = _text(text, what="anchor fact", limit=limits.ITEM_MAX_CHARS)
    evidence = _ref_list(refs)
    cap = limits.ANCHOR_FACTS_MAX
    _capacity(
        card.facts,
        cap,
        "Past has {n}/{limit} anchor facts — remove one first"
        " (remove_anchor_fact) or fold it into the portrait",
    )
    _not_duplicate(fact, [f.text for f in card.facts], what="anchor fact")
    _resolve(evidence, refs_exist)
    facts = (*card.facts, Fact(fact, evidence))
    return _ok(
        replace(card, facts=facts), f"anchor fact {len(facts)} added ({len(facts)}/{cap}): {fact!r}"
    )


@_mutation
def remove_anchor_fact(card: Card, *, index: object) -> MutationResult:
    """Remove one anchor fact from Past."""
    position = _index(index, card.facts, section="Past (anchor facts)")
    gone = card.facts[position]
    facts = _drop(card.facts, position)
    return _ok(
        replace(card, facts=facts),
        f"anchor fact {index} removed: {gone.text!r} ({len(facts)}/{limits.ANCHOR_FACTS_MAX} left)",
    )


# --- Now ------------------------------------------------------------------------------


@_mutation
def add_now(
    card: Card, *, text: object, refs: object, since: object, refs_exist: RefsResolver
) -> MutationResult:
    """Append a Now item (a hook, not a narrative) with its since: date."""
    hook = _text(text, what="Now item", limit=limits.ITEM_MAX_CHARS)
    day = _day(since, what="since")
    evidence = _ref_list(refs)
    cap = limits.NOW_MAX
    _capacity(card.now, cap, "Now has {n}/{limit} items — remove or promote one first")
    _not_duplicate(hook, [n.text for n in card.now], what="Now item")
    _resolve(evidence, refs_exist)
    now = (*card.now, NowItem(hook, evidence, day))
    return _ok(replace(card, now=now), f"Now item {len(now)} added ({len(now)}/{cap}): {hook!r}")


@_mutation
def remove_now(card: Card, *, index: object) -> MutationResult:
    """Drop one Now item."""
    position = _index(index, card.now, section="Now")
    gone = card.now[position]
    now = _drop(card.now, position)
    return _ok(
        replace(card, now=now),
        f"Now {index} removed: {gone.text!r} ({len(now)}/{limits.NOW_MAX} left)",
    )


@_mutation
def promote_now(
    card: Card, *, index: object, refs: object, text: object, refs_exist: RefsResolver
) -> MutationResult:
    """Move a Now item to Past as an anchor fact worded by ``text`` (K5)."""
    position = _index(index, card.now, section="Now")
    fact = _text(text, what="anchor fact", limit=limits.ITEM_MAX_CHARS)
    evidence = _ref_list(refs)
    cap = limits.ANCHOR_FACTS_MAX
    _capacity(
        card.facts,
        cap,
        "Past has {n}/{limit} anchor facts — remove one first, or fold"
        f" Now {index} into the portrait (set_portrait) and remove_now",
    )
    _not_duplicate(fact, [f.text for f in card.facts], what="anchor fact")
    _resolve(evidence, refs_exist)
    facts = (*card.facts, Fact(fact, evidence))
    now = _drop(card.now, position)
    return _ok(
        replace(card, facts=facts, now=now),
        f"Now {index} promoted to anchor fact {len(facts)}: {fact!r}"
        f" (anchor facts {len(facts)}/{cap}, Now {len(now)}/{limits.NOW_MAX})",
    )


# --- Horizon --------------------------------------------------------------------------


@_mutation
def add_horizon(
    card: Card, *, text: object, by: object, refs: object, refs_exist: RefsResolver
) -> MutationResult:
    """Append a Horizon item (commitment, deadline, awaited reply) with its by: date."""
    item = _text(text, what="Horizon item", limit=limits.ITEM_MAX_CHARS)
    day = _day(by, what="by")
    evidence = _ref_list(refs)
    cap = limits.HORIZON_MAX
    _capacity(card.horizon, cap, "Horizon has {n}/{limit} items — resolve one first")
    _not_duplicate(item, [h.text for h in card.horizon], what="Horizon item")
    _resolve(evidence, refs_exist)
    horizon = (*card.horizon, HorizonItem(item, day, evidence))
    return _ok(
        replace(card, horizon=horizon),
        f"Horizon item {len(horizon)} added ({len(horizon)}/{cap}): {item!r} by {day}",
    )


@_mutation
def resolve_horizon(card: Card, *, index: object, outcome: object) -> MutationResult:
    """Remove a Horizon item because it was resolved — the only way one leaves (K6)."""
    position = _index(index, card.horizon, section="Horizon")
    result = _text(outcome, what="outcome", limit=limits.ITEM_MAX_CHARS)
    gone = card.horizon[position]
    horizon = _drop(card.horizon, position)
    # The outcome lives in this message (and so in the run's log); if it matters later,
    # the agent records it with add_now or add_anchor_fact.
    return _ok(
        replace(card, horizon=horizon),
        f"Horizon {index} resolved: {gone.text!r} — outcome: {result!r}"
        f" ({len(horizon)}/{limits.HORIZON_MAX} left)",
    )


# --- Self-model -----------------------------------------------------------------------


@_mutation
def add_lesson(
    card: Card, *, text: object, refs: object, refs_exist: RefsResolver
) -> MutationResult:
    """Append a Self-model lesson, unless it restates or contradicts a directive (K4)."""
    lesson = _text(text, what="lesson", limit=limits.ITEM_MAX_CHARS)
    evidence = _ref_list(refs)
    directive = conflicting_directive(lesson)
    if directive is not None and not (directive.overridable and cites_user_override(lesson)):
        what = f"lesson restates or contradicts core directive '{directive.key}' ({directive.rule})"
        if not directive.overridable:
            raise _Refused(f"{what} — a lesson cannot override this directive; drop it")
        raise _Refused(
            f"{what} — lessons are deltas on the directives, not copies or"
            " reversals. Drop it, or if the user explicitly asked for this, start"
            " the lesson with 'User override:' (or '用户明确要求') and cite that"
            " slice in refs"
        )
    cap = limits.LESSONS_MAX
    _capacity(
        card.lessons, cap, "Self-model has {n}/{limit} lessons — remove one first (remove_lesson)"
    )
    _not_duplicate(lesson, [x.text for x in card.lessons], what="lesson")
    _resolve(evidence, refs_exist)
    lessons = (*card.lessons, Lesson(lesson, evidence))
    note = f" as a user override of '{directive.key}'" if directive else ""
    return _ok(
        replace(card, lessons=lessons),
        f"lesson {len(lessons)} added{note} ({len(lessons)}/{cap}): {lesson!r}",
    )


@_mutation
def remove_lesson(card: Card, *, index: object) -> MutationResult:
    """Remove one Self-model lesson."""
    position = _index(index, card.lessons, section="Self-model")
    gone = card.lessons[position]
    lessons = _drop(card.lessons, position)
    return _ok(
        replace(card, lessons=lessons),
        f"lesson {index} removed: {gone.text!r} ({len(lessons)}/{limits.LESSONS_MAX} left)",
    )


# --- the agent's tools, 1:1 ------------------------------------------------------------

TOOLS: dict[str, Callable[..., MutationResult]] = {
    "set_identity": set_identity,
    "set_portrait": set_portrait,
    "add_anchor_fact": add_anchor_fact,
    "remove_anchor_fact": remove_anchor_fact,
    "add_now": add_now,
    "remove_now": remove_now,
    "promote_now": promote_now,
    "add_horizon": add_horizon,
    "resolve_horizon": resolve_horizon,
    "add_lesson": add_lesson,
    "remove_lesson": remove_lesson,
}


def tool_arguments(name: str) -> tuple[str, ...]:
    """The argument names a tool takes from the model (refs_exist is the caller's)."""
    params = inspect.signature(TOOLS[name]).parameters
    return tuple(p for p in params if p not in ("card", "refs_exist"))


def apply_tool(
    card: Card, name: str, arguments: Mapping[str, object], *, refs_exist: RefsResolver
) -> MutationResult:
    """Run one tool call from the model; malformed calls are refused, never raised."""
    if name not in TOOLS:
        return MutationResult(False, f"unknown tool {name!r} — one of {', '.join(TOOLS)}", card)
    expected = tool_arguments(name)
    if not isinstance(arguments, Mapping):
        return MutationResult(False, f"{name} takes arguments {', '.join(expected)}", card)
    missing = [a for a in expected if a not in arguments]
    extra = [a for a in arguments if a not in expected]
    if missing or extra:
        problem = "; ".join(
            part
            for part in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unexpected {', '.join(map(str, extra))}" if extra else "",
            )
            if part
        )
        return MutationResult(
            False, f"{name} takes arguments {', '.join(expected)} — {problem}", card
        )
    kwargs = dict(arguments)
    if "refs_exist" in inspect.signature(TOOLS[name]).parameters:
        kwargs["refs_exist"] = refs_exist
    return TOOLS[name](card, **kwargs)
