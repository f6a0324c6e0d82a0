"""Every legacy record kind and its rules, in one table (LEGACY_KV.md "Key families").

A kind names its key family, the value shape it is read with (legacy_shapes), the family
its counts go to in the report, and the checks a record must pass before it is planned.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, make_dataclass
from datetime import UTC, datetime
from typing import Any

from django.utils.translation import gettext, gettext_noop

from memory.interop import legacy_shapes as shapes
from memory.interop.legacy.report import BadRecord
from memory.models import Experience, Message, Relation, Tombstone
from memory.models.deletion import tombstone_expiry

ID_MAX = 64
KEY_MAX = 300
SPEAKERS = {"user": "user", "assistant": "assistant", "ai": "assistant", "system": "system"}
TOMB_KINDS = frozenset(Tombstone.Kind.values)
MESSAGE_TYPES = frozenset(Message.Type.values)
TIME_CERTAINTIES = frozenset(Experience.TimeCertainty.values)
RELATION_TYPES = frozenset(Relation.Type.values)
_STR_HASH_RE = re.compile(r"[0-9a-f]{1,8}")
KEY_RE = re.compile(r"^(msg|hl|exp|rel|tomb|mem):([^:]*):(.+)\Z", re.DOTALL)


def _columns(shape: str, *more: str) -> type:
    """A named record of one value shape's columns (legacy_shapes.FIELDS), plus `more`."""
    names = [f.column for f in shapes.FIELDS[shape]] if shape else []
    return make_dataclass(f"{shape.title() or 'Meta'}Columns", [(n, Any, None) for n in [*names, *more]], slots=True)


@dataclass(slots=True)
class Record:
    """One parsed legacy record: its kind, key, profile and columns."""

    kind: str  # a key of KINDS
    key: str
    profile: str
    rid: str  # the id part of the key (mid, hid, eid, rid, fragment id, tombstoned id)
    cols: Any  # the kind's named columns (Kind.columns)
    extra: dict
    tkind: str = ""  # tombstones: the kind of record they name


@dataclass(frozen=True, slots=True)
class Kind:
    """The rules of one key family."""

    name: str
    shape: str  # the legacy_shapes value shape ("" for meta: the value is plain text)
    check: Callable[[Record], None]
    columns: type  # the named record of its columns
    few_values: tuple[str, ...] = ()  # columns with a handful of distinct values


def classify(key: str) -> tuple[str, re.Match | None]:
    """The kind of a key (one of KINDS, or "unknown") and KEY_RE's match of it, if that was tried."""
    if key.startswith("mem_"):
        return "mem_", None
    if key.startswith("meta_"):
        return "meta", None
    m = KEY_RE.match(key)
    return (m.group(1), m) if m else ("unknown", None)


def _require(rec: Record, *columns: str) -> None:
    for col in columns:
        if getattr(rec.cols, col) in (None, ""):
            raise BadRecord(rec.key, gettext("%(field)s is missing") % {"field": col})


def _check_id(rec: Record, value: str, what: str) -> None:
    """`what`: a field name, or a gettext_noop description translated only when refused."""
    if not value or len(value) > ID_MAX:
        raise BadRecord(rec.key, gettext("%(what)s %(value)s must be 1-%(max)s characters") % {
            "what": gettext(what), "value": repr(value[:80]), "max": ID_MAX})


def _check_hash(rec: Record) -> None:
    chash = rec.cols.content_hash
    if chash and not _STR_HASH_RE.fullmatch(chash):
        raise BadRecord(rec.key, gettext("content_hash %(value)s is not a strHash") % {"value": repr(chash)})


def _keep_unknown(rec: Record, column: str, known: frozenset, default: str) -> None:
    """An unknown legacy enum value becomes the default; its spelling stays in legacy_extra."""
    value = getattr(rec.cols, column)
    if value not in known:
        rec.extra.setdefault(column, value)
        setattr(rec.cols, column, default)


def check_msg(rec: Record) -> None:
    c = rec.cols
    _require(rec, "speaker", "created_at")
    _check_id(rec, rec.rid, gettext_noop("message id"))
    if c.speaker not in SPEAKERS:
        raise BadRecord(rec.key, gettext("speaker %(value)s is not user or assistant") % {"value": repr(c.speaker)})
    c.speaker = SPEAKERS[c.speaker]
    _keep_unknown(rec, "message_type", MESSAGE_TYPES, Message.Type.TEXT)
    _check_hash(rec)
    if c.attachment is not None and not isinstance(c.attachment, dict):
        raise BadRecord(rec.key, gettext("attachment must be an object or null"))


def check_mem(rec: Record) -> None:
    c = rec.cols
    _require(rec, "role", "ts")
    if c.role not in SPEAKERS:
        raise BadRecord(rec.key, gettext("role %(value)s is not user or assistant") % {"value": repr(c.role)})
    try:
        datetime.fromtimestamp(c.ts / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise BadRecord(rec.key, gettext("ts %(value)s is out of range (epoch milliseconds)") % {"value": c.ts}) from None
    if c.hour is not None and not 0 <= c.hour <= 23:
        raise BadRecord(rec.key, gettext("hour %(value)s is not 0-23") % {"value": c.hour})
    if len(c.day_key) > 10:
        raise BadRecord(rec.key, gettext("day_key %(value)s is not YYYY-MM-DD") % {"value": repr(c.day_key)})
    if len(c.period) > 16:
        rec.extra.setdefault("period", c.period)
        c.period = ""


def check_hl(rec: Record) -> None:
    _require(rec, "mid", "created_at")
    _check_id(rec, rec.rid, gettext_noop("highlight id"))
    _check_id(rec, rec.cols.mid, "mid")


def check_exp(rec: Record) -> None:
    c = rec.cols
    _require(rec, "title", "recorded_at")
    _check_id(rec, rec.rid, gettext_noop("experience id"))
    if len(c.title) > 300:
        raise BadRecord(rec.key, gettext("title is longer than 300 characters"))
    if c.status not in ("active", "candidate", "rejected"):
        raise BadRecord(rec.key, gettext("status %(value)s is not active or candidate") % {"value": repr(c.status)})
    mids = c.source_mids
    if mids is None:
        c.source_mids = []
    elif not isinstance(mids, list) or not all(isinstance(x, str) and 0 < len(x) <= ID_MAX for x in mids):
        raise BadRecord(rec.key, gettext("source_mids must be a list of message ids"))
    _keep_unknown(rec, "time_certainty", TIME_CERTAINTIES, Experience.TimeCertainty.UNKNOWN)
    text = c.event_time_text or ""
    c.event_time = None
    if text:
        try:
            c.event_time = shapes.parse_time(text, "event_time")
        except shapes.BadValue:
            pass  # free text such as "去年夏天" stays text
    if len(text) > 100:
        rec.extra.setdefault("event_time", text)
        c.event_time_text = text[:100]


def check_rel(rec: Record) -> None:
    c = rec.cols
    _require(rec, "from_id", "to_id", "type", "created_at")
    _check_id(rec, rec.rid, gettext_noop("relation id"))
    _check_id(rec, c.from_id, "from_id")
    _check_id(rec, c.to_id, "to_id")
    if c.type not in RELATION_TYPES:
        raise BadRecord(rec.key, gettext("type %(value)s is not one of %(choices)s") % {
            "value": repr(c.type), "choices": ", ".join(Relation.Type.values)})


def check_tomb(rec: Record) -> None:
    kind, sep, oid = rec.rid.partition(":")
    if not sep or kind not in TOMB_KINDS or not oid:
        raise BadRecord(rec.key, gettext("a tombstone key is tomb:<profile>:<msg|hl|exp|rel|mem>:<id>"))
    if len(oid) > 128:
        raise BadRecord(rec.key, gettext("tombstoned id is longer than 128 characters"))
    _require(rec, "deleted_at")
    try:
        tombstone_expiry(rec.cols.deleted_at)
    except OverflowError:
        raise BadRecord(rec.key, gettext("deleted_at %(value)s is out of range") % {"value": rec.cols.deleted_at}) from None
    rec.tkind, rec.rid = kind, oid
    _check_hash(rec)


def check_meta(rec: Record) -> None:
    if rec.key.startswith("meta_lastTs:") or rec.key == "meta_lastTs":
        text = rec.cols.value
        if not text.strip().lstrip("-").isdigit():
            raise BadRecord(rec.key, gettext("meta_lastTs must be an integer (epoch ms), not %(value)s") % {"value": repr(text[:40])})


_MEM_COLUMNS = _columns("mem")
_MEM_FEW = ("role", "day_key", "period")
KINDS: dict[str, Kind] = {
    "tomb": Kind("tomb", "tomb", check_tomb, _columns("tomb")),
    "msg": Kind("msg", "msg", check_msg, _columns("msg"), ("speaker", "message_type", "sync_status")),
    "mem": Kind("mem", "mem", check_mem, _MEM_COLUMNS, _MEM_FEW),
    "mem_": Kind("mem_", "mem", check_mem, _MEM_COLUMNS, _MEM_FEW),
    "hl": Kind("hl", "hl", check_hl, _columns("hl")),
    "exp": Kind("exp", "exp", check_exp, _columns("exp", "event_time")),
    "rel": Kind("rel", "rel", check_rel, _columns("rel")),
    "meta": Kind("meta", "", check_meta, _columns("", "value")),
}
FRAGMENT_KINDS = ("mem", "mem_")
