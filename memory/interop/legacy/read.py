"""Phase 1, read: stream the dump, classify each key, parse and check its value (rules 5, 8)."""

import base64
import binascii
import json
import re
import sys
from collections import defaultdict
from datetime import UTC, datetime
from typing import IO, Any

import orjson
from django.utils.translation import gettext, gettext_noop

from memory.interop import legacy_shapes as shapes
from memory.interop.dump_reader import DumpEntry, DumpFormatError, read_dump
from memory.interop.legacy.kinds import KEY_MAX, KEY_RE, KINDS, Record, classify
from memory.interop.legacy.report import BadDump, BadRecord, Progress, Report, no_progress
from memory.models.archive import DEFAULT_PROFILE_KEY, PROFILE_KEY_RE
from memory.phrases import json_error, shown


def _has_float(value: dict | list) -> bool:
    for x in value.values() if value.__class__ is dict else value:
        c = x.__class__
        if c is float or ((c is dict or c is list) and _has_float(x)):
            return True
    return False


# PostgreSQL text cannot hold NUL, so a dump that has one is refused on every engine alike.
NUL = gettext_noop("the key or the value contains a NUL character (\\u0000)")


def _has_nul(value: Any) -> bool:
    c = value.__class__
    if c is str:
        return "\x00" in value
    if c is dict:
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if c is list:
        return any(_has_nul(v) for v in value)
    return False


def loads_value(text: str) -> Any:
    """json.loads(text), computed by orjson where that gives the very same value.

    orjson rejects what it cannot represent exactly (NaN, 1e400, lone surrogates) and
    reads integers beyond 64 bits as floats; for those, and for anything holding a float,
    the json module decides, so values, errors and their messages are the json module's.
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    c = value.__class__
    if c is float or ((c is dict or c is list) and _has_float(value)):
        return json.loads(text)
    return value


class Profiles:
    """Rule 5: a key's profile segment, or `owner` when it fails the regex (reported once per key)."""

    def __init__(self, report: Report):
        self.report = report
        self.valid: dict[str, bool] = {}
        self.canonical: dict[str, str] = {}

    def resolve(self, segment: str | None, key: str) -> str:
        if segment is not None:
            valid = self.valid.get(segment)
            if valid is None:
                valid = self.valid[segment] = PROFILE_KEY_RE.match(segment) is not None
                self.canonical[segment] = segment
            if valid:
                return self.canonical[segment]  # one string per profile, not one per record
        self.report.note(gettext("profile fallback: %(key)s: profile %(segment)s is not a valid key; imported under"
                                 " 'owner'") % {"key": key, "segment": repr(segment)})
        return DEFAULT_PROFILE_KEY


def decode_value(entry: DumpEntry) -> str:
    if not entry.base64:
        return entry.value
    try:
        return base64.b64decode(entry.value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise BadRecord(entry.key, gettext("value is marked base64 but does not decode to UTF-8 text")) from None


def kv_attrs(entry: DumpEntry) -> dict:
    """The KV entry's own attributes, kept for export (expiration, ttl, metadata, base64)."""
    kv = {}
    if entry.expiration is not None:
        try:
            seconds = shapes.parse_expiration(entry.expiration)
            if seconds is not None:
                datetime.fromtimestamp(seconds, tz=UTC)
        except shapes.BadValue as exc:
            raise BadRecord(entry.key, str(exc)) from None
        except (OverflowError, OSError, ValueError):
            raise BadRecord(entry.key, gettext("expiration is out of range: %(value)s") % {"value": repr(entry.expiration)}) from None
        kv["expiration"] = entry.expiration
    if entry.expiration_ttl is not None:
        kv["expiration_ttl"] = entry.expiration_ttl
    if entry.metadata is not None:
        kv["metadata"] = entry.metadata
    if entry.base64:
        kv["base64"] = True
    kv.update(entry.extra)
    return kv


def _meta_record(entry: DumpEntry, text: str, kv: dict, profiles: Profiles) -> Record:
    name, sep, rest = entry.key.partition(":")
    profile = profiles.resolve(rest.split(":", 1)[0], entry.key) if sep else ""
    return Record("meta", entry.key, profile, "", KINDS["meta"].columns(value=text), {shapes.KV: kv} if kv else {})


def parse_entry(entry: DumpEntry, profiles: Profiles, family: str, match: re.Match | None = None) -> Record:
    """Classify and check one dump entry; raises BadRecord naming the key.

    `match`: KEY_RE's match of the key when the caller has it (classify), so it is matched once."""
    key = entry.key
    if entry.problem:
        raise BadRecord(key, entry.problem)
    if len(key) > KEY_MAX:
        raise BadRecord(key[:80] + "…", gettext("key is longer than %(max)s characters") % {"max": KEY_MAX})
    kind = KINDS.get(family)
    if kind is None:
        raise BadRecord(key, gettext("unknown key family (expected msg:, mem:, mem_, hl:, exp:, rel:, tomb: or meta_)"))
    text = decode_value(entry)
    plain = (entry.expiration is None and entry.expiration_ttl is None and entry.metadata is None
             and not entry.base64 and not entry.extra)
    kv = {} if plain else kv_attrs(entry)  # what kv_attrs gives an entry of key and value only
    if "\x00" in key or "\x00" in text or (kv and _has_nul(kv)):
        raise BadRecord(key, gettext(NUL))
    if not kind.shape:
        rec = _meta_record(entry, text, kv, profiles)
    else:
        rec = _value_record(entry, text, kv, profiles, family, match)
    kind.check(rec)
    return rec


def _value_record(
    entry: DumpEntry, text: str, kv: dict, profiles: Profiles, family: str, match: re.Match | None = None
) -> Record:
    key = entry.key
    try:
        value = loads_value(text)
    except json.JSONDecodeError as exc:
        raise BadRecord(key, gettext("value does not parse as JSON (%(error)s: line %(line)s column %(column)s"
                                     " (char %(pos)s))") % {
            "error": shown(json_error(exc.msg)), "line": exc.lineno, "column": exc.colno, "pos": exc.pos}) from None
    except TypeError as exc:
        raise BadRecord(key, gettext("value does not parse as JSON (%(error)s)") % {"error": exc}) from None
    if not isinstance(value, dict):
        raise BadRecord(key, gettext("value must be a JSON object, not %(type)s") % {"type": type(value).__name__})
    if "\\u0000" in text and _has_nul(value):
        raise BadRecord(key, gettext(NUL))
    if family == "mem_":
        profile, rid = DEFAULT_PROFILE_KEY, key[len("mem_") :]
    else:
        m = match or KEY_RE.match(key)
        profile, rid = profiles.resolve(m.group(2), key), m.group(3)
    try:
        cols, extra = shapes.read_value(KINDS[family].shape, value)
    except shapes.BadValue as exc:
        raise BadRecord(key, str(exc)) from None
    if kv:
        extra[shapes.KV] = kv
    kind = KINDS[family]
    for name in kind.few_values:  # held once each rather than once per record (memory)
        value = cols[name]
        if value.__class__ is str:
            cols[name] = sys.intern(value)
    return Record(family, key, profile, rid, kind.columns(**cols), extra)


def read_records(
    fh: IO[str], *, skip_bad: bool, report: Report, progress: Progress = no_progress
) -> dict[str, list[Record]]:
    """Parse the whole dump into records by kind; BadDump on the first bad one unless skip_bad."""
    by_kind: dict[str, list[Record]] = defaultdict(list)
    profiles = Profiles(report)
    seen = 0
    keys: set[str] = set()  # a KV store holds a key once: a dump that repeats one is not its dump
    try:
        for entry in read_dump(fh):
            seen += 1
            family, match = classify(entry.key)
            report.add(family, "read")
            try:
                if entry.key in keys:
                    raise BadRecord(entry.key, gettext("the key appears twice in the dump (a KV store holds each key once)"))
                keys.add(entry.key)
                rec = parse_entry(entry, profiles, family, match)
            except BadRecord as exc:
                if not skip_bad:
                    raise BadDump(gettext("bad record %(key)s: %(problem)s. Nothing was written.") % {
                        "key": exc.key, "problem": exc.problem}) from None
                report.add(family, "errors")
                report.note(gettext("skipped bad record %(key)s: %(problem)s") % {"key": exc.key, "problem": exc.problem})
                continue
            by_kind[rec.kind].append(rec)
            if seen % 5000 == 0:
                progress("reading", seen, 0)
    except DumpFormatError as exc:
        raise BadDump(gettext("malformed dump %(problem)s. Nothing was written.") % {"problem": exc}) from None
    progress("reading", seen, seen)
    return by_kind
