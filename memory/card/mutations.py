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

from django.utils.translation import gettext_noop

from memory.phrases import say

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
            return MutationResult(False, refusal.args[0], card)  # a phrase (memory.phrases)

    return wrapper


def _ok(card: Card, message: str) -> MutationResult:
    return MutationResult(True, message, card)


# --- argument validation --------------------------------------------------------------


def _text(value: object, *, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise _Refused(say(gettext_noop("%(what)s must be a string, got %(type)s"), what=what, type=type(value).__name__))
    text = value.strip()
    if not text:
        raise _Refused(say(gettext_noop("%(what)s is empty — write it and retry"), what=what))
    if "\n" in text or "\r" in text:
        raise _Refused(say(gettext_noop("%(what)s must be one line — remove the line breaks and retry"), what=what))
    if len(text) > limit:
        raise _Refused(say(gettext_noop("%(what)s is %(length)s chars, limit %(limit)s — compress and retry"),
                           what=what, length=len(text), limit=limit))
    return text


def _ref_list(value: object) -> Refs:
    if isinstance(value, str):
        raise _Refused(say(
            gettext_noop("refs must be a list of %(shape)s strings, e.g. ['2026/08/11/1426'] — got the single string %(value)s"),
            shape=REF_SHAPE, value=repr(value)))
    if not isinstance(value, list | tuple):
        raise _Refused(say(gettext_noop("refs must be a list of %(shape)s strings, got %(type)s"),
                           shape=REF_SHAPE, type=type(value).__name__))
    if not value:
        raise _Refused(say(gettext_noop("refs are required — cite at least one slice as %(shape)s (no evidence, no write)"),
                           shape=REF_SHAPE))
    for ref in value:
        if not is_ref(ref):
            raise _Refused(say(gettext_noop("ref %(ref)s is not a valid %(shape)s, e.g. '2026/08/11/1426'"),
                               ref=repr(ref), shape=REF_SHAPE))
    refs = tuple(dict.fromkeys(value))  # a repeated ref is the same evidence
    if len(refs) > limits.REFS_MAX_PER_ITEM:
        raise _Refused(say(gettext_noop("%(count)s refs, limit %(limit)s per item — cite the strongest evidence"),
                           count=len(refs), limit=limits.REFS_MAX_PER_ITEM))
    return refs


def _resolve(refs: Refs, refs_exist: RefsResolver) -> None:
    missing = set(refs_exist(refs))
    if missing:
        listed = ", ".join(f"[{r}]" for r in refs if r in missing)
        raise _Refused(say(
            gettext_noop("refs not found among this profile's slices: %(refs)s — cite slices that exist (read_slice to check)"),
            refs=listed))


def _day(value: object, *, what: str) -> date:
    day = parse_day(value)
    if day is None:
        raise _Refused(say(gettext_noop("%(what)s %(value)s is not a date YYYY-MM-DD, e.g. '2026-08-21'"),
                           what=what, value=repr(value)))
    return day


def _index(value: object, items: Sequence[object], *, section: str) -> int:
    """The 0-based position of a 1-based tool index."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Refused(say(gettext_noop("index must be a whole number, got %(value)s"), value=repr(value)))
    count = len(items)
    if count == 0:
        raise _Refused(say(gettext_noop("%(section)s is empty — there is no item %(index)s"), section=section, index=value))
    if not 1 <= value <= count:
        template = (gettext_noop("index %(index)s is out of range — %(section)s has %(count)s item (valid: %(valid)s)")
                    if count == 1 else
                    gettext_noop("index %(index)s is out of range — %(section)s has %(count)s items (valid: %(valid)s)"))
        raise _Refused(say(template, index=value, section=section, count=count, valid="1" if count == 1 else f"1–{count}"))
    return value - 1


def _capacity(items: Sequence[object], limit: int, full: str, **more: object) -> None:
    """`full`: a %(n)s/%(limit)s template (gettext_noop) for the refusal when `items` are at `limit`."""
    if len(items) >= limit:
        raise _Refused(say(full, n=len(items), limit=limit, **more))


def _not_duplicate(text: str, existing: Sequence[str], *, what: str) -> None:
    key = text.casefold()
    for k, other in enumerate(existing, 1):
        if other.casefold() == key:
            raise _Refused(say(gettext_noop("%(what)s %(index)s already says this — nothing added"), what=what, index=k))


def _drop(items: tuple, position: int) -> tuple:
    return items[:position] + items[position + 1 :]


# --- Identity -------------------------------------------------------------------------


@_mutation
def set_identity(
    card: Card, *, field: object, value: object, refs: object, refs_exist: RefsResolver
) -> MutationResult:
    """Set (or, with an empty value, clear) one Identity line, in place."""
    name = _text(field, what=say(gettext_noop("identity field")), limit=limits.IDENTITY_FIELD_MAX_CHARS)
    if ":" in name:
        raise _Refused(say(gettext_noop(
            "identity field %(name)s must not contain ':' — e.g. 'Name', 'Address them as', 'Pronouns', 'Alias'"),
            name=repr(name)))
    clearing = isinstance(value, str) and not value.strip()
    text = (
        ""
        if clearing
        else _text(value, what=say(gettext_noop("identity %(name)s"), name=repr(name)), limit=limits.IDENTITY_VALUE_MAX_CHARS)
    )
    if " — refs: " in text:
        raise _Refused(say(gettext_noop("identity %(name)s must not contain ' — refs: ' — pass evidence in refs"),
                           name=repr(name)))
    evidence = _ref_list(refs)
    lines = card.identity
    position = next(
        (k for k, line in enumerate(lines) if line.field.casefold() == name.casefold()), None
    )
    cap = limits.IDENTITY_MAX_LINES
    if clearing:
        if position is None:
            raise _Refused(say(gettext_noop("Identity has no %(name)s line — nothing to clear"), name=repr(name)))
        _resolve(evidence, refs_exist)
        kept = _drop(lines, position)
        return _ok(
            replace(card, identity=kept), say(gettext_noop("Identity %(name)s cleared (%(n)s/%(limit)s lines)"), name=repr(name), n=len(kept), limit=cap)
        )
    new = IdentityLine(name, text, evidence)
    if position is None:
        _capacity(
            lines,
            cap,
            gettext_noop("Identity has %(n)s/%(limit)s lines — change an existing field or clear one (empty value) first"),
        )
        _resolve(evidence, refs_exist)
        updated = (*lines, new)
    else:
        if lines[position] == new:
            return _ok(card, say(gettext_noop("Identity %(name)s already is %(text)s — nothing changed"), name=repr(name), text=repr(text)))
        _resolve(evidence, refs_exist)
        updated = (*lines[:position], new, *lines[position + 1 :])
    return _ok(
        replace(card, identity=updated),
        say(gettext_noop("Identity %(name)s set to %(text)s (%(n)s/%(limit)s lines)"),
            name=repr(name), text=repr(text), n=len(updated), limit=cap),
    )


# --- Past -----------------------------------------------------------------------------


@_mutation
def set_portrait(card: Card, *, text: object) -> MutationResult:
    """Rewrite the Past portrait paragraph (third person, one paragraph)."""
    if not isinstance(text, str):
        raise _Refused(say(gettext_noop("portrait must be a string, got %(type)s"), type=type(text).__name__))
    # Line endings and trailing spaces are invisible; normalising them keeps the stored
    # card canonical without touching a word of the content.
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    portrait = "\n".join(lines).strip()
    if not portrait:
        raise _Refused(say(gettext_noop("portrait is empty — write the third-person paragraph and retry")))
    for k, line in enumerate(portrait.split("\n"), 1):
        if not line.strip():
            raise _Refused(say(gettext_noop(
                "portrait must be one paragraph — line %(line)s is blank; join the paragraphs and retry"), line=k))
        if line.startswith("- "):
            raise _Refused(say(gettext_noop(
                "portrait line %(line)s starts with '- ' and would read as an anchor fact — reword it, or use add_anchor_fact"),
                line=k))
        if line.startswith("#"):
            raise _Refused(say(gettext_noop(
                "portrait line %(line)s starts with '#' and would read as a heading — reword it"), line=k))
    cap = limits.PORTRAIT_MAX_CHARS
    if len(portrait) > cap:
        raise _Refused(say(gettext_noop("portrait is %(length)s chars, limit %(limit)s — compress and retry"),
                           length=len(portrait), limit=cap))
    if portrait == card.portrait:
        return _ok(card, say(gettext_noop("portrait unchanged (%(n)s/%(limit)s chars)"), n=len(portrait), limit=cap))
    return _ok(replace(card, portrait=portrait), say(gettext_noop("portrait set (%(n)s/%(limit)s chars)"), n=len(portrait), limit=cap))


@_mutation
def add_anchor_fact(
    card: Card, *, text: object, refs: object, refs_exist: RefsResolver
) -> MutationResult:
    """Append an anchor fact to Past."""
    fact = _text(text, what=say(gettext_noop("anchor fact")), limit=limits.ITEM_MAX_CHARS)
    evidence = _ref_list(refs)
    cap = limits.ANCHOR_FACTS_MAX
    _capacity(
        card.facts,
        cap,
        gettext_noop("Past has %(n)s/%(limit)s anchor facts — remove one first (remove_anchor_fact) or fold it into the portrait"),
    )
    _not_duplicate(fact, [f.text for f in card.facts], what=say(gettext_noop("anchor fact")))
    _resolve(evidence, refs_exist)
    facts = (*card.facts, Fact(fact, evidence))
    return _ok(
        replace(card, facts=facts), say(gettext_noop("anchor fact %(n)s added (%(n)s/%(limit)s): %(text)s"), n=len(facts), limit=cap, text=repr(fact))
    )


@_mutation
def remove_anchor_fact(card: Card, *, index: object) -> MutationResult:
    """Remove one anchor fact from Past."""
    position = _index(index, card.facts, section=say(gettext_noop("Past (anchor facts)")))
    gone = card.facts[position]
    facts = _drop(card.facts, position)
    return _ok(
        replace(card, facts=facts),
        say(gettext_noop("anchor fact %(index)s removed: %(text)s (%(n)s/%(limit)s left)"),
            index=index, text=repr(gone.text), n=len(facts), limit=limits.ANCHOR_FACTS_MAX),
    )


# --- Now ------------------------------------------------------------------------------


@_mutation
def add_now(
    card: Card, *, text: object, refs: object, since: object, refs_exist: RefsResolver
) -> MutationResult:
    """Append a Now item (a hook, not a narrative) with its since: date."""
    hook = _text(text, what=say(gettext_noop("Now item")), limit=limits.ITEM_MAX_CHARS)
    day = _day(since, what="since")  # the argument's name, as the model wrote it
    evidence = _ref_list(refs)
    cap = limits.NOW_MAX
    _capacity(card.now, cap, gettext_noop("Now has %(n)s/%(limit)s items — remove or promote one first"))
    _not_duplicate(hook, [n.text for n in card.now], what=say(gettext_noop("Now item")))
    _resolve(evidence, refs_exist)
    now = (*card.now, NowItem(hook, evidence, day))
    return _ok(replace(card, now=now), say(gettext_noop("Now item %(n)s added (%(n)s/%(limit)s): %(text)s"),
                                               n=len(now), limit=cap, text=repr(hook)))


@_mutation
def remove_now(card: Card, *, index: object) -> MutationResult:
    """Drop one Now item."""
    position = _index(index, card.now, section=say(gettext_noop("Now")))
    gone = card.now[position]
    now = _drop(card.now, position)
    return _ok(
        replace(card, now=now),
        say(gettext_noop("Now %(index)s removed: %(text)s (%(n)s/%(limit)s left)"),
            index=index, text=repr(gone.text), n=len(now), limit=limits.NOW_MAX),
    )


@_mutation
def promote_now(
    card: Card, *, index: object, refs: object, text: object, refs_exist: RefsResolver
) -> MutationResult:
    """Move a Now item to Past as an anchor fact worded by ``text`` (K5)."""
    position = _index(index, card.now, section=say(gettext_noop("Now")))
    fact = _text(text, what=say(gettext_noop("anchor fact")), limit=limits.ITEM_MAX_CHARS)
    evidence = _ref_list(refs)
    cap = limits.ANCHOR_FACTS_MAX
    _capacity(
        card.facts,
        cap,
        gettext_noop("Past has %(n)s/%(limit)s anchor facts — remove one first, or fold Now %(index)s into the portrait"
                     " (set_portrait) and remove_now"),
        index=index,
    )
    _not_duplicate(fact, [f.text for f in card.facts], what=say(gettext_noop("anchor fact")))
    _resolve(evidence, refs_exist)
    facts = (*card.facts, Fact(fact, evidence))
    now = _drop(card.now, position)
    return _ok(
        replace(card, facts=facts, now=now),
        say(gettext_noop("Now %(index)s promoted to anchor fact %(n)s: %(text)s (anchor facts %(n)s/%(limit)s,"
                         " Now %(now)s/%(now_limit)s)"),
            index=index, n=len(facts), text=repr(fact), limit=cap, now=len(now), now_limit=limits.NOW_MAX),
    )


# --- Horizon --------------------------------------------------------------------------


@_mutation
def add_horizon(
    card: Card, *, text: object, by: object, refs: object, refs_exist: RefsResolver
) -> MutationResult:
    """Append a Horizon item (commitment, deadline, awaited reply) with its by: date."""
    item = _text(text, what=say(gettext_noop("Horizon item")), limit=limits.ITEM_MAX_CHARS)
    day = _day(by, what="by")
    evidence = _ref_list(refs)
    cap = limits.HORIZON_MAX
    _capacity(card.horizon, cap, gettext_noop("Horizon has %(n)s/%(limit)s items — resolve one first"))
    _not_duplicate(item, [h.text for h in card.horizon], what=say(gettext_noop("Horizon item")))
    _resolve(evidence, refs_exist)
    horizon = (*card.horizon, HorizonItem(item, day, evidence))
    return _ok(
        replace(card, horizon=horizon),
        say(gettext_noop("Horizon item %(n)s added (%(n)s/%(limit)s): %(text)s by %(day)s"),
            n=len(horizon), limit=cap, text=repr(item), day=str(day)),
    )


@_mutation
def resolve_horizon(card: Card, *, index: object, outcome: object) -> MutationResult:
    """Remove a Horizon item because it was resolved — the only way one leaves (K6)."""
    position = _index(index, card.horizon, section=say(gettext_noop("Horizon")))
    result = _text(outcome, what=say(gettext_noop("outcome")), limit=limits.ITEM_MAX_CHARS)
    gone = card.horizon[position]
    horizon = _drop(card.horizon, position)
    # The outcome lives in this message (and so in the run's log); if it matters later,
    # the agent records it with add_now or add_anchor_fact.
    return _ok(
        replace(card, horizon=horizon),
        say(gettext_noop("Horizon %(index)s resolved: %(text)s — outcome: %(outcome)s (%(n)s/%(limit)s left)"),
            index=index, text=repr(gone.text), outcome=repr(result), n=len(horizon), limit=limits.HORIZON_MAX),
    )


# --- Self-model -----------------------------------------------------------------------


@_mutation
def add_lesson(
    card: Card, *, text: object, refs: object, refs_exist: RefsResolver
) -> MutationResult:
    """Append a Self-model lesson, unless it restates or contradicts a directive (K4)."""
    lesson = _text(text, what=say(gettext_noop("lesson")), limit=limits.ITEM_MAX_CHARS)
    evidence = _ref_list(refs)
    directive = conflicting_directive(lesson)
    if directive is not None and not (directive.overridable and cites_user_override(lesson)):
        what = {"key": directive.key, "rule": directive.rule}
        if not directive.overridable:
            raise _Refused(say(gettext_noop(
                "lesson restates or contradicts core directive '%(key)s' (%(rule)s) — a lesson cannot override this"
                " directive; drop it"), **what))
        raise _Refused(say(gettext_noop(
            "lesson restates or contradicts core directive '%(key)s' (%(rule)s) — lessons are deltas on the"
            " directives, not copies or reversals. Drop it, or if the user explicitly asked for this, start the lesson"
            " with 'User override:' (or '用户明确要求') and cite that slice in refs"), **what))
    cap = limits.LESSONS_MAX
    _capacity(
        card.lessons, cap, gettext_noop("Self-model has %(n)s/%(limit)s lessons — remove one first (remove_lesson)")
    )
    _not_duplicate(lesson, [x.text for x in card.lessons], what=say(gettext_noop("lesson")))
    _resolve(evidence, refs_exist)
    lessons = (*card.lessons, Lesson(lesson, evidence))
    facts = {"n": len(lessons), "limit": cap, "text": repr(lesson)}
    return _ok(replace(card, lessons=lessons), say(
        gettext_noop("lesson %(n)s added as a user override of '%(key)s' (%(n)s/%(limit)s): %(text)s"),
        key=directive.key, **facts) if directive else say(
        gettext_noop("lesson %(n)s added (%(n)s/%(limit)s): %(text)s"), **facts))


@_mutation
def remove_lesson(card: Card, *, index: object) -> MutationResult:
    """Remove one Self-model lesson."""
    position = _index(index, card.lessons, section=say(gettext_noop("Self-model")))
    gone = card.lessons[position]
    lessons = _drop(card.lessons, position)
    return _ok(
        replace(card, lessons=lessons),
        say(gettext_noop("lesson %(index)s removed: %(text)s (%(n)s/%(limit)s left)"),
            index=index, text=repr(gone.text), n=len(lessons), limit=limits.LESSONS_MAX),
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
