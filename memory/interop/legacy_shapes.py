"""The legacy KV value shapes and their columns, shared by the importer and the kv export.

Each family lists its value fields with a reader (legacy value -> column value) and a
writer (column value -> legacy value). The importer keeps in `legacy_extra` every field
the writer would not reproduce exactly (unknown fields, other date spellings, nulls vs
blanks) and the names of fields that were absent, so the kv export gives back the
value it read (A6, LEGACY_KV rule 7).
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.utils.translation import gettext

ABSENT = "_absent"  # legacy_extra: value fields the record did not have
KV = "_kv"  # legacy_extra: the KV entry's expiration / expiration_ttl / metadata / base64
RESERVED = {ABSENT, KV}


class BadValue(ValueError):
    """A legacy value that cannot be read; the message names the field and the problem."""


def parse_time(value: Any, field: str) -> datetime:
    """An ISO 8601 string or epoch milliseconds, as an aware datetime."""
    if isinstance(value, bool):
        raise BadValue(gettext("%(field)s is not a time: %(value)s") % {"field": field, "value": repr(value)})
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value / 1000, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise BadValue(gettext("%(field)s is out of range: %(value)s") % {"field": field, "value": repr(value)}) from None
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return parse_time(int(text), field)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise BadValue(gettext("%(field)s is not an ISO 8601 time: %(value)s") % {"field": field, "value": repr(value)}) from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise BadValue(gettext("%(field)s is not a time: %(value)s") % {"field": field, "value": repr(value)})


def parse_optional_time(value: Any, field: str) -> datetime | None:
    if value is None or value == "":
        return None
    return parse_time(value, field)


def iso_js(value: datetime | None) -> str | None:
    """JavaScript's Date.toISOString(): 2026-10-19T12:34:56.789Z."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def parse_expiration(value: Any) -> int | None:
    """KV expiration: epoch seconds, or an ISO date some tools write instead."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise BadValue(gettext("expiration is not a time: %(value)s") % {"value": repr(value)})
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise BadValue(gettext("expiration is neither epoch seconds nor an ISO date: %(value)s") % {"value": repr(value)}) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp())
    raise BadValue(gettext("expiration is not a time: %(value)s") % {"value": repr(value)})


def _str(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadValue(gettext("%(field)s must be a string, not %(type)s") % {"field": field, "type": type(value).__name__})
    return value


def _str_or_none(col: str) -> str | None:
    return col or None


def _ident(value: Any, field: str) -> Any:
    return value


def _out_ident(col: Any) -> Any:
    return col


@dataclass(frozen=True)
class Field:
    legacy: str
    column: str
    read: Callable[[Any, str], Any]
    write: Callable[[Any], Any]


def _time_field(legacy: str, column: str) -> Field:
    return Field(legacy, column, parse_time, iso_js)


def _opt_time_field(legacy: str, column: str) -> Field:
    return Field(legacy, column, parse_optional_time, iso_js)


def _str_field(legacy: str, column: str) -> Field:
    return Field(legacy, column, _str, _str_or_none)


def _text_field(legacy: str, column: str) -> Field:
    return Field(legacy, column, _str, _out_ident)


def _int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadValue(gettext("%(field)s must be a number, not %(value)s") % {"field": field, "value": repr(value)})
    try:
        return int(value)
    except ValueError:
        raise BadValue(gettext("%(field)s must be a number, not %(value)s") % {"field": field, "value": repr(value)}) from None


def _opt_int(value: Any, field: str) -> int | None:
    return None if value is None or value == "" else _int(value, field)


MSG_FIELDS = (
    _text_field("speaker", "speaker"),
    _text_field("message_type", "message_type"),
    _time_field("created_at", "created_at"),
    _str_field("source_id", "source_id"),
    _str_field("sync_status", "sync_status"),
    _opt_time_field("deleted_at", "deleted_at"),
    Field("attachment", "attachment", _ident, _out_ident),
    _text_field("content", "content"),
    _str_field("content_hash", "content_hash"),
)
MEM_FIELDS = (
    _text_field("role", "role"),
    _text_field("content", "content"),
    Field("ts", "ts", _int, _out_ident),
    _str_field("day_key", "day_key"),
    Field("hour", "hour", _opt_int, _out_ident),
    _str_field("period", "period"),
)
HL_FIELDS = (
    _text_field("mid", "mid"),
    _text_field("content", "content"),
    _time_field("created_at", "created_at"),
    _opt_time_field("deleted_at", "deleted_at"),
)
EXP_FIELDS = (
    _text_field("title", "title"),
    _text_field("content", "content"),
    Field("source_mids", "source_mids", _ident, _out_ident),
    _text_field("status", "status"),
    _text_field("time_certainty", "time_certainty"),
    _str_field("event_time", "event_time_text"),
    _time_field("created_at", "recorded_at"),
    _opt_time_field("deleted_at", "deleted_at"),
)
REL_FIELDS = (
    _text_field("from_id", "from_id"),
    _text_field("to_id", "to_id"),
    _text_field("type", "type"),
    _time_field("created_at", "created_at"),
    _opt_time_field("deleted_at", "deleted_at"),
)
TOMB_FIELDS = (
    _text_field("kind", "kind"),
    _text_field("id", "object_id"),
    _time_field("deleted_at", "deleted_at"),
    _str_field("content_hash", "content_hash"),
    _opt_time_field("created_at", "created_at"),
)
FIELDS = {
    "msg": MSG_FIELDS,
    "mem": MEM_FIELDS,
    "hl": HL_FIELDS,
    "exp": EXP_FIELDS,
    "rel": REL_FIELDS,
    "tomb": TOMB_FIELDS,
}


LEGACY_NAMES = {family: {f.legacy for f in fields} for family, fields in FIELDS.items()}


def _canonical_js_time(text: Any) -> bool:
    """Already spelled as Date.toISOString() would (the fast, common case)."""
    return (
        isinstance(text, str) and len(text) == 24 and text[10] == "T" and text[19] == "." and text[23] == "Z"
    )


# How read_value treats each field: the common, already-canonical spellings take a short
# path with the very result the generic path gives (see read_value).
_TEXT, _STR, _TIME, _OTHER = range(4)


def _kind(f: Field) -> int:
    if f.read is _str and f.write is _out_ident:
        return _TEXT
    if f.read is _str and f.write is _str_or_none:
        return _STR
    if f.read is parse_time and f.write is iso_js:
        return _TIME
    return _OTHER


_PLANS = {
    family: tuple((f.legacy, f.column, f.read, f.write, _kind(f)) for f in fields)
    for family, fields in FIELDS.items()
}
_fromisoformat = datetime.fromisoformat


def read_value(family: str, value: dict) -> tuple[dict, dict]:
    """(columns, legacy_extra) for a legacy value; raises BadValue naming the field."""
    cols: dict = {}
    extra: dict = {}
    absent: list[str] = []
    for legacy, column, read, write, kind in _PLANS[family]:
        if legacy not in value:
            absent.append(legacy)
            try:
                cols[column] = read(None, legacy)
            except BadValue:
                cols[column] = None  # required fields are checked by the importer
            continue
        original = value[legacy]
        if original.__class__ is str:
            if kind == _TEXT or (kind == _STR and original):
                # _str gives the string back; the writer reproduces it exactly.
                cols[column] = original
                continue
            if kind == _TIME and _canonical_js_time(original) and original[0].isdigit():
                try:
                    # What parse_time does with it (nothing to strip, not all digits).
                    cols[column] = _fromisoformat(original)
                    continue
                except ValueError:
                    pass  # parse_time raises the BadValue
        col = read(original, legacy)
        cols[column] = col
        if write is iso_js and _canonical_js_time(original):
            continue
        if original.__class__ is str and write is _out_ident:
            continue
        out = write(col)
        if out != original or type(out) is not type(original):
            extra[legacy] = original
    known = LEGACY_NAMES[family]
    for k, v in value.items():
        if k not in known:
            extra[k] = v
    if absent:
        extra[ABSENT] = absent
    return cols, extra


def write_value(family: str, cols: dict, extra: dict) -> dict:
    """The legacy value for a row's columns and legacy_extra (the inverse of read_value)."""
    absent = set(extra.get(ABSENT, ()))
    value = {}
    for f in FIELDS[family]:
        if f.legacy in absent:
            continue
        value[f.legacy] = extra[f.legacy] if f.legacy in extra else f.write(cols.get(f.column))
    for k, v in extra.items():
        if k not in RESERVED and k not in value:
            value[k] = v
    return value
