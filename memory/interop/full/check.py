"""The full import's checks (SPEC X4, S5): each record against the schema before anything is
written, and each row the write would make against what the database takes."""

import re
from collections.abc import Callable, Iterator
from datetime import date, datetime
from functools import cache

from django.core.exceptions import ValidationError
from django.db.models import CharField, CheckConstraint, F, Q, TextField
from django.utils import timezone
from django.utils.translation import gettext

from memory import limits
from memory.interop.full.report import BadExport
from memory.models.archive import (
    OBJECT_ID_RE,
    PROFILE_KEY_RE,
    MessageSpeaker,
    MessageStatus,
    MessageType,
    SliceCloseReason,
    SliceLogEntryKind,
    is_slice_key,
)
from memory.models.card import EvolutionRunStatus, EvolutionRunTrigger
from memory.models.curation import (
    ExperienceHistoryActor,
    ExperienceStatus,
    ExperienceTimeCertainty,
    HighlightSource,
    RelationType,
)
from memory.models.deletion import TombstoneKind
from memory.models.proactive import ProactiveReason

# X4 / S5 (issue 16): each record is checked before anything is written, and a bad one is
# refused naming the profile, the kind, the record (its position and id) and the field — never
# left to the database (an IntegrityError, a 500) or to a later page (an id with '/').
DAY_KEY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _text(value) -> str | None:
    if not isinstance(value, str):
        return gettext("must be text, not %(type)s") % {"type": type(value).__name__}
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return gettext("contains a lone surrogate (text that cannot be stored)")
    if "\x00" in value:
        return gettext("contains a NUL character (text that cannot be stored)")
    return None


def _ident(value) -> str | None:
    if not isinstance(value, str) or not OBJECT_ID_RE.fullmatch(value):
        return gettext("%(value)s is not an id (1-64 characters without '/', '\\', spaces, control characters, lone"
                       " surrogates or <>\"'`[]{})") % {"value": _shown(value)}
    return None


def _when(value) -> str | None:
    if not isinstance(value, str):
        return gettext("must be an ISO 8601 time, not %(type)s") % {"type": type(value).__name__}
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return gettext("%(value)s is not an ISO 8601 time") % {"value": _shown(value)}
    return None


def _one_of(choices):
    allowed = tuple(getattr(choices, "values", choices))

    def check(value) -> str | None:
        return None if value in allowed else gettext("%(value)s is not one of %(choices)s") % {
            "value": _shown(value), "choices": ", ".join(allowed)}
    return check


def _optional(check):
    return lambda value: None if value in (None, "") else check(value)


def _hour(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 23:
        return gettext("%(value)s is not an hour 0-23") % {"value": _shown(value)}
    return None


def _slice_key(value) -> str | None:
    if not is_slice_key(value):
        return gettext("%(value)s is not a slice key YYYY-MM-DD-HHMM") % {"value": _shown(value)}
    return None


def _day(value) -> str | None:
    if not isinstance(value, str) or not DAY_KEY_RE.fullmatch(value):
        return gettext("%(value)s is not a date YYYY-MM-DD") % {"value": _shown(value)}
    try:
        date.fromisoformat(value)
    except ValueError:
        return gettext("%(value)s is not a date YYYY-MM-DD") % {"value": _shown(value)}
    return None


def _position(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        return gettext("%(value)s is not a position (a whole number from 0)") % {"value": _shown(value)}
    return None


def _object(value) -> str | None:
    return None if isinstance(value, dict) else gettext("must be an object")


def _trace(value) -> str | None:
    """A prompt trace (U4): an object whose lists of rows hold ids (mids, hids, eids) or lore
    positions, nothing else."""
    if not isinstance(value, dict):
        return gettext("must be an object")
    for part in ("recalled", "highlights", "experiences"):
        if part in value and (problem := _ids(value[part])):
            return f"{part}: {problem}"
    lore = value.get("lore", [])
    if not isinstance(lore, list) or any(_position(n) for n in lore):
        return "lore: " + gettext("must be a list of positions")
    return None


def _image(value) -> str | None:
    """An image's metadata: an object, whose `file` (a zip member) is text when there."""
    if not isinstance(value, dict):
        return "must be an object"
    return _optional(_text)(value.get("file"))


def _ids(value) -> str | None:
    if not isinstance(value, list):
        return gettext("must be a list of ids")
    return next((p for p in map(_ident, value) if p), None)


def _history(value) -> str | None:
    if not isinstance(value, list) or not all(isinstance(h, dict) for h in value):
        return gettext("must be a list of objects")
    for n, h in enumerate(value):
        problem = (_one_of(ExperienceHistoryActor)(h.get("actor")) or _text(h.get("action"))
                   or _optional(_when)(h.get("created_at")))
        if problem:
            return gettext("entry %(n)s: %(problem)s") % {"n": n, "problem": problem}
    return None


# kind -> field -> (required, check)
SCHEMA = {
    "tombstones": {"kind": (True, _one_of(TombstoneKind)), "object_id": (True, _ident),
                   "deleted_at": (True, _when), "expires_at": (True, _optional(_when)),
                   "created_at": (False, _optional(_when))},
    "slices": {"key": (True, _slice_key), "started_at": (True, _when), "last_message_at": (True, _when),
               "ended_at": (False, _optional(_when)), "close_reason": (False, _optional(_one_of(SliceCloseReason))),
               "tz": (False, _optional(_text))},
    "messages": {"mid": (True, _ident), "created_at": (True, _when), "speaker": (True, _one_of(MessageSpeaker)),
                 "message_type": (False, _one_of(MessageType)), "status": (False, _one_of(MessageStatus)),
                 "content": (False, _text), "raw_content": (False, _optional(_text)),
                 "local_hour": (False, _optional(_hour)), "local_day_key": (False, _optional(_text)),
                 "period": (False, _optional(_text)), "deleted_at": (False, _optional(_when)),
                 "slice": (False, _optional(_slice_key)), "tz": (False, _optional(_text)),
                 # Written as they are (memory/interop/bulk_insert.py): text, checked here (X4).
                 "source_id": (False, _optional(_text)), "sync_status": (False, _optional(_text)),
                 "legacy_key": (False, _optional(_text)), "content_hash": (False, _optional(_text)),
                 "reviewed_at": (False, _optional(_when)), "reply_of": (False, _optional(_ident)),
                 "attachment": (False, _optional(_image)), "prompt_trace": (False, _optional(_trace))},
    "legacy_fragments": {"key": (True, _text), "fingerprint": (True, _text), "disposition": (True, _text),
                         "content": (True, _text), "mid": (False, _optional(_ident))},
    "highlights": {"hid": (True, _ident), "mid": (True, _ident), "content": (True, _text),
                   "created_at": (True, _when), "source": (False, _optional(_one_of(HighlightSource))),
                   "deleted_at": (False, _optional(_when))},
    "experiences": {"eid": (True, _ident), "title": (True, _text), "content": (True, _text),
                    "status": (True, _one_of(ExperienceStatus)),
                    "time_certainty": (True, _one_of(ExperienceTimeCertainty)), "recorded_at": (True, _when),
                    "event_time": (False, _optional(_when)), "invalid_at": (False, _optional(_when)),
                    "deleted_at": (False, _optional(_when)), "updated_at": (False, _optional(_when)),
                    "reviewed_at": (False, _optional(_when)), "source_mids": (False, _ids),
                    "history": (False, _history)},
    "relations": {"rid": (True, _ident), "type": (True, _one_of(RelationType)), "from_id": (True, _ident),
                  "to_id": (True, _ident), "created_at": (True, _when), "deleted_at": (False, _optional(_when))},
    "legacy_meta": {"key": (True, _text)},
    "card_snapshots": {"slice": (True, _slice_key), "text": (False, _optional(_text)),
                       "created_at": (False, _optional(_when))},
    "favourites": {"mid": (True, _ident), "excerpt": (False, _optional(_text)), "hid": (False, _optional(_ident)),
                   "created_at": (False, _optional(_when))},
    # Version 2 (issue 28 point 4).
    "evolution_runs": {"ref": (True, _ident), "trigger": (True, _one_of(EvolutionRunTrigger)),
                       "status": (True, _one_of(EvolutionRunStatus)), "created_at": (True, _when),
                       "slice": (False, _optional(_slice_key)), "started_at": (False, _optional(_when)),
                       "finished_at": (False, _optional(_when))},
    "slice_log": {"slice": (True, _slice_key), "kind": (True, _one_of(SliceLogEntryKind)),
                  "created_at": (True, _when), "summary": (False, _optional(_text)),
                  "data": (False, _optional(_object))},
    "lore_entries": {"position": (True, _position), "content": (True, _text), "name": (False, _optional(_text))},
    "proactive_sends": {"day": (True, _day), "reason": (True, _one_of(ProactiveReason)), "subject": (True, _text),
                        "mid": (False, _optional(_ident)), "created_at": (False, _optional(_when))},
}


def _aware(value: datetime) -> datetime:
    """A time as the database stores it (a naive one is in the default time zone)."""
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def storable(obj) -> str | None:
    """Why the database would refuse this row — a null in a required column, a value its
    column cannot take (type, range, length, NUL, lone surrogate), a check constraint it
    breaks — or None. The checking pass
    asks it of every row it would write, so the apply's batches meet no such refusal (S4)."""
    for f, attname, may_be_null, text_column in _column_plan(type(obj)):
        value = getattr(obj, attname)
        if value is None:
            if may_be_null:
                continue
            return gettext("field %(field)s cannot be empty (null)") % {"field": repr(f.name)}
        kind = value.__class__
        if kind is dict or kind is list or (kind is not str and isinstance(value, (dict, list))):
            problem = _json_text(value)
            if problem:
                return _field_problem(f.name, problem)
        elif kind is str or isinstance(value, str):
            # ASCII without NUL is always storable: the encode in `_text` is for the rest.
            if not (value.isascii() and "\x00" not in value) and (problem := _text(value)):
                return _field_problem(f.name, problem)
            if f.max_length is not None and len(value) > f.max_length:
                return _field_problem(f.name, gettext("%(length)s characters, more than its %(max)s") % {
                    "length": f"{len(value):,}", "max": f.max_length})
            if text_column:
                continue
        try:
            f.run_validators(f.get_prep_value(value))
        except (ValueError, TypeError, OverflowError, ValidationError) as exc:
            reason = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            return _field_problem(f.name, gettext("%(value)s cannot be stored (%(reason)s)") % {
                "value": _shown(value), "reason": reason})
    for check, holds in _checks(type(obj)):
        if holds(obj) is False:
            names = dict.fromkeys(_names(check.condition))
            values = ", ".join(f"{n} {getattr(obj, obj._meta.get_field(n).attname)!r:.60}" for n in names)
            return gettext("%(values)s: breaks the database's rule %(rule)s") % {"values": values, "rule": repr(check.name)}
    return None


def _field_problem(name: str, problem: str) -> str:
    return gettext("field %(field)s: %(problem)s") % {"field": repr(name), "problem": problem}


@cache
def _checks(model) -> list[tuple[CheckConstraint, Callable]]:
    """The model's check constraints, each with its condition made once into a function of a row
    (issue 24 point 6: evaluating the tree anew for each of a million rows was a third of a check)."""
    return [(c, _holds(c.condition, model)) for c in model._meta.constraints if isinstance(c, CheckConstraint)]


def _names(node) -> Iterator[str]:
    for child in node.children:
        if isinstance(child, Q):
            yield from _names(child)
        else:
            yield child[0].split("__")[0]


def _holds(node, model) -> Callable:
    """A check constraint's condition as a function of an unsaved row giving what SQL has it:
    True, False, or None (unknown: a NULL, or a lookup this does not evaluate — the database
    decides)."""
    if isinstance(node, Q):
        parts = [_holds(child, model) for child in node.children]
        conjunction, negated = node.connector == Q.AND, node.negated

        def combined(obj):
            results = [part(obj) for part in parts]
            if conjunction:
                value = False if False in results else None if None in results else True
            else:
                value = True if True in results else None if None in results else False
            return (None if value is None else not value) if negated else value
        return combined
    lookup, expected = node
    name, _, op = lookup.partition("__")
    attname = model._meta.get_field(name).attname
    other = model._meta.get_field(expected.name).attname if isinstance(expected, F) else None
    compare = _LOOKUPS.get(op or "exact")

    def holds(obj):
        value = getattr(obj, attname)
        wanted = getattr(obj, other) if other else expected
        if op == "isnull":
            return (value is None) == wanted
        if value is None or wanted is None or compare is None:
            return None
        if isinstance(value, datetime) and isinstance(wanted, datetime):
            value, wanted = _aware(value), _aware(wanted)
        try:
            return compare(value, wanted)
        except (TypeError, re.error):
            return None
    return holds


_LOOKUPS = {
    "exact": lambda v, e: v == e, "in": lambda v, e: v in e, "regex": lambda v, e: re.search(e, str(v)) is not None,
    "gt": lambda v, e: v > e, "gte": lambda v, e: v >= e, "lt": lambda v, e: v < e, "lte": lambda v, e: v <= e,
}


def _json_text(value) -> str | None:
    """The first text inside a JSON value (keys too) that cannot be stored (PostgreSQL's
    jsonb refuses NUL, no database takes a lone surrogate)."""
    for item in json_strings(value):
        if problem := _text(item):
            return gettext("a text inside it %(problem)s") % {"problem": problem}
    return None


def json_strings(value) -> Iterator[str]:
    """Every string inside a JSON value, keys too, without recursion."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, str):
            yield item


@cache
def _column_plan(model) -> list[tuple]:
    """The columns an import fills (not the key, not the links it sets itself), each as
    (field, attname, whether it may stay empty — nullable, or filled on save —, whether it is a
    text column), worked out once per model (issue 24 point 6: a million rows ask it)."""
    return [(f, f.attname, f.null or getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False),
             isinstance(f, (CharField, TextField)))
            for f in model._meta.concrete_fields if not (f.primary_key or f.is_relation)]


def check_profile(pdata, position: int) -> None:
    """Refuse the profile's first bad record with a BadExport naming it and its field."""
    key = check_members(pdata, position)
    for kind in SCHEMA:
        for n, rec in enumerate(pdata.get(kind) or []):
            check_record(kind, n, rec, key)


def check_members(pdata, position: int) -> str:
    """Refuse a profile whose own members are bad (its key, a record list that is not a list,
    its card, a text over its limit); its key. The records are checked one at a time as they
    stream (`check_record`, issue 24 point 6)."""
    if not isinstance(pdata, dict):
        raise BadExport(gettext("profiles[%(n)s] is not an object") % {"n": position})
    key = pdata.get("key")
    if not isinstance(key, str) or not PROFILE_KEY_RE.fullmatch(key):
        raise BadExport(gettext("profiles[%(n)s]: key %(key)s is not a profile key (1-32 of a-z, 0-9, '_', '-')") % {
            "n": position, "key": _shown(key)})
    profile = gettext("profile %(key)s") % {"key": repr(key)}
    for kind in SCHEMA:
        if not isinstance(pdata.get(kind) or [], list):
            raise BadExport(gettext("%(profile)s: %(kind)s must be a list") % {"profile": profile, "kind": kind})
    card = pdata.get("card")
    if card is not None and not (isinstance(card, dict) and _text(card.get("text") or "") is None):
        raise BadExport(gettext("%(profile)s: card must be an object with a text") % {"profile": profile})
    for name, required in (("settings", ()), ("companion_card", ("identity", "spec", "imported_at"))):
        value = pdata.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise BadExport(gettext("%(profile)s: %(kind)s must be an object") % {"profile": profile, "kind": name})
        missing = next((f for f in required if f not in value), None)
        if missing:
            raise BadExport(gettext("%(record)s: the field %(field)s is missing") % {
                "record": f"{profile}, {name}", "field": repr(missing)})
        for when in ("created_at", "imported_at"):
            if value.get(when) is not None and (problem := _when(value[when])):
                raise BadExport(gettext("%(record)s: field %(field)s: %(problem)s") % {
                    "record": f"{profile}, {name}", "field": repr(when), "problem": problem})
        if name == "settings" and value.get("avatar") is not None and (problem := _image(value["avatar"])):
            raise BadExport(gettext("%(record)s: field %(field)s: %(problem)s") % {
                "record": f"{profile}, settings", "field": "'avatar'", "problem": problem})
        check_lengths(value, name, lambda name=name: f"{profile}, {name}")
    check_lengths({k: v for k, v in pdata.items() if k not in SCHEMA}, "profile", lambda: profile)
    return key


def check_record(kind: str, n: int, rec, key: str) -> None:
    """Refuse record `n` of the profile `key`'s list `kind` if it is bad, naming it and its field
    (the name is made only for a refusal: two translations a record were a tenth of a preview,
    issue 24 point 6)."""
    def where() -> str:
        named = gettext("%(profile)s, %(kind)s[%(n)s]") % {
            "profile": gettext("profile %(key)s") % {"key": repr(key)}, "kind": kind, "n": n}
        ident = next((rec[f] for f in IDENT_FIELDS if isinstance(rec.get(f), str)), None) if isinstance(rec, dict) else None
        return named if ident is None else f"{named} ({_shown(ident)})"

    if not isinstance(rec, dict):
        raise BadExport(gettext("%(record)s is not an object") % {"record": where()})
    for name, (required, check) in SCHEMA[kind].items():
        if name not in rec:
            if required:
                raise BadExport(gettext("%(record)s: the field %(field)s is missing") % {
                    "record": where(), "field": repr(name)})
            continue
        problem = check(rec[name])
        if problem:
            raise BadExport(gettext("%(record)s: field %(field)s: %(problem)s") % {
                "record": where(), "field": repr(name), "problem": problem})
    check_lengths(rec, kind, where)


IDENT_FIELDS = ("mid", "hid", "eid", "rid", "key", "object_id", "slice")


def _shown(value) -> str:
    """A value as a refusal quotes it: its repr, cut at 80 characters."""
    return repr(value)[:80]


# S6 (issue 24 points 5 and 6): every string in an import is within a limit of memory.limits —
# these fields are a person's long texts (MESSAGE), the persona its own, every other string a
# field (FIELD); a string inside a JSON value (legacy_extra, a history entry's before/after,
# the card) may be any of them, so it takes the longest (MESSAGE).
LONG_TEXTS = {
    ("messages", "content"), ("messages", "raw_content"), ("legacy_fragments", "content"),
    ("highlights", "content"), ("experiences", "content"), ("card_snapshots", "text"), ("legacy_meta", "value"),
    ("evolution_runs", "summary"), ("evolution_runs", "diff"), ("evolution_runs", "error"),
    ("evolution_runs", "card_before"), ("evolution_runs", "card_after"), ("lore_entries", "content"),
    ("companion_card", "persona_built"),
}
PROFILE_TEXTS = {"persona": limits.PERSONA}


def check_lengths(rec: dict, kind: str, where: Callable[[], str]) -> None:
    """Refuse the record's first string over its limit, naming the record (`where()`), the
    field, the limit and its setting (limits.TextTooLong's words)."""
    shortest = limits.FIELD.chars
    for name, value in rec.items():
        if isinstance(value, str):
            if len(value) <= shortest:
                continue  # within every limit: the common case, one comparison
            limit = (limits.MESSAGE if (kind, name) in LONG_TEXTS
                     else PROFILE_TEXTS.get(name, limits.FIELD) if kind == "profile" else limits.FIELD)
            _within(limit, value, gettext("%(record)s: field %(field)s") % {"record": where(), "field": repr(name)})
        elif isinstance(value, (dict, list)):
            for item in json_strings(value):
                if len(item) > shortest:
                    _within(limits.MESSAGE, item, gettext("%(record)s: a text inside field %(field)s") % {
                        "record": where(), "field": repr(name)})


def _within(limit: limits.TextLimit, value: str, record: str) -> None:
    try:
        limit.check(value, record=record)
    except limits.TextTooLong as exc:
        raise BadExport(str(exc)) from None

