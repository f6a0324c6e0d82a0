"""Full import of our own export (SPEC X2, X4, S4): dedupe by id, tombstones block, every record
checked before anything is written, then written in short batches (re-running finishes an
interrupted one)."""

import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, DataError, IntegrityError, connection, transaction
from django.db.models import CharField, CheckConstraint, F, Q, TextField
from django.utils import timezone

from memory.clock import PERIOD_IDS, period_of
from memory.interop.export import FORMAT, VERSION
from memory.interop.json_stream import BadFile, ExportFile, Header
from memory.interop.legacy.write import assign_slices
from memory.models import (
    Card,
    CardSnapshot,
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Favourite,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    Message,
    Profile,
    Relation,
    Slice,
    Tombstone,
)
from memory.models.archive import (
    OBJECT_ID_RE,
    PROFILE_KEY_RE,
    MessageSpeaker,
    MessageStatus,
    MessageType,
    SliceCloseReason,
    is_slice_key,
)
from memory.models.curation import (
    ExperienceHistoryActor,
    ExperienceStatus,
    ExperienceTimeCertainty,
    HighlightSource,
    RelationType,
)
from memory.models.deletion import TombstoneKind
from memory.recall.index import index_messages, optimize_index

KINDS = ("tombstones", "slices", "messages", "legacy_fragments", "highlights", "experiences", "relations",
         "legacy_meta", "card", "card_snapshots", "favourites")
COLUMNS = ("read", "created", "existing", "tombstoned")
LOCK_POLL_SECONDS = 0.1  # SQLite's busy handler's longest sleep between two tries


class BadExport(Exception):
    """The file is not an export we can read; nothing was written."""


class ImportInterrupted(Exception):
    """A database error stopped the apply part-way; the message says what was kept and that
    running the same import again finishes it (X2: what exists is skipped)."""


@dataclass
class FullReport:
    counts: dict = field(default_factory=lambda: {k: dict.fromkeys(COLUMNS, 0) for k in KINDS})
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    def add(self, kind: str, column: str, n: int = 1) -> None:
        self.counts[kind][column] += n

    def as_dict(self) -> dict:
        return {"dry_run": self.dry_run, "kinds": self.counts, "notes": self.notes}

    def rows(self) -> list[list]:
        """One row per kind: the kind, then its COLUMNS counts (the command prints them)."""
        return [[kind, *(c[col] for col in COLUMNS)] for kind, c in self.counts.items()]


def _dt(value):
    return datetime.fromisoformat(value) if value else None


# X4 / S5 (issue 16): each record is checked before anything is written, and a bad one is
# refused naming the profile, the kind, the record (its position and id) and the field — never
# left to the database (an IntegrityError, a 500) or to a later page (an id with '/').
DAY_KEY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _text(value) -> str | None:
    if not isinstance(value, str):
        return f"must be text, not {type(value).__name__}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (text that cannot be stored)"
    if "\x00" in value:
        return "contains a NUL character (text that cannot be stored)"
    return None


def _ident(value) -> str | None:
    if not isinstance(value, str) or not OBJECT_ID_RE.fullmatch(value):
        return (f"{value!r:.80} is not an id (1-64 characters without '/', '\\', spaces, control"
                " characters, lone surrogates or <>\"'`[]{})")
    return None


def _when(value) -> str | None:
    if not isinstance(value, str):
        return f"must be an ISO 8601 time, not {type(value).__name__}"
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return f"{value!r:.80} is not an ISO 8601 time"
    return None


def _one_of(choices):
    allowed = tuple(getattr(choices, "values", choices))

    def check(value) -> str | None:
        return None if value in allowed else f"{value!r:.80} is not one of {', '.join(allowed)}"
    return check


def _optional(check):
    return lambda value: None if value in (None, "") else check(value)


def _hour(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 23:
        return f"{value!r:.80} is not an hour 0-23"
    return None


def _slice_key(value) -> str | None:
    if not is_slice_key(value):
        return f"{value!r:.80} is not a slice key YYYY-MM-DD-HHMM"
    return None


def _ids(value) -> str | None:
    if not isinstance(value, list):
        return "must be a list of ids"
    return next((p for p in map(_ident, value) if p), None)


def _history(value) -> str | None:
    if not isinstance(value, list) or not all(isinstance(h, dict) for h in value):
        return "must be a list of objects"
    for n, h in enumerate(value):
        problem = _one_of(ExperienceHistoryActor)(h.get("actor")) or _text(h.get("action"))
        if problem:
            return f"entry {n}: {problem}"
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
                 "slice": (False, _optional(_slice_key)), "tz": (False, _optional(_text))},
    "legacy_fragments": {"key": (True, _text), "fingerprint": (True, _text), "disposition": (True, _text),
                         "content": (True, _text), "mid": (False, _optional(_ident))},
    "highlights": {"hid": (True, _ident), "mid": (True, _ident), "content": (True, _text),
                   "created_at": (True, _when), "source": (False, _optional(_one_of(HighlightSource))),
                   "deleted_at": (False, _optional(_when))},
    "experiences": {"eid": (True, _ident), "title": (True, _text), "content": (True, _text),
                    "status": (True, _one_of(ExperienceStatus)),
                    "time_certainty": (True, _one_of(ExperienceTimeCertainty)), "recorded_at": (True, _when),
                    "event_time": (False, _optional(_when)), "invalid_at": (False, _optional(_when)),
                    "deleted_at": (False, _optional(_when)), "source_mids": (False, _ids),
                    "history": (False, _history)},
    "relations": {"rid": (True, _ident), "type": (True, _one_of(RelationType)), "from_id": (True, _ident),
                  "to_id": (True, _ident), "created_at": (True, _when), "deleted_at": (False, _optional(_when))},
    "legacy_meta": {"key": (True, _text)},
    "card_snapshots": {"slice": (True, _slice_key), "text": (False, _optional(_text))},
}


def _aware(value: datetime) -> datetime:
    """A time as the database stores it (a naive one is in the default time zone)."""
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def storable(obj) -> str | None:
    """Why the database would refuse this row — a null in a required column, a value its
    column cannot take (type, range, length, NUL, lone surrogate), a check constraint it
    breaks — or None. The checking pass
    asks it of every row it would write, so the apply's batches meet no such refusal (S4)."""
    for f, may_be_null in _columns(type(obj)):
        value = getattr(obj, f.attname)
        if value is None:
            if may_be_null:
                continue
            return f"field {f.name!r} cannot be empty (null)"
        if isinstance(value, (dict, list)):
            problem = _json_text(value)
            if problem:
                return f"field {f.name!r}: {problem}"
        if isinstance(value, str):
            problem = _text(value)
            if problem:
                return f"field {f.name!r}: {problem}"
            if f.max_length is not None and len(value) > f.max_length:
                return f"field {f.name!r}: {len(value):,} characters, more than its {f.max_length}"
            if isinstance(f, (CharField, TextField)):
                continue
        try:
            f.run_validators(f.get_prep_value(value))
        except (ValueError, TypeError, OverflowError, ValidationError) as exc:
            reason = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            return f"field {f.name!r}: {value!r:.80} cannot be stored ({reason})"
    for check in _checks(type(obj)):
        if _holds(check.condition, obj) is False:
            names = dict.fromkeys(_names(check.condition))
            values = ", ".join(f"{n} {getattr(obj, obj._meta.get_field(n).attname)!r:.60}" for n in names)
            return f"{values}: breaks the database's rule {check.name!r}"
    return None


@cache
def _checks(model) -> list[CheckConstraint]:
    return [c for c in model._meta.constraints if isinstance(c, CheckConstraint)]


def _names(node) -> Iterator[str]:
    for child in node.children:
        if isinstance(child, Q):
            yield from _names(child)
        else:
            yield child[0].split("__")[0]


def _holds(node, obj) -> bool | None:
    """A check constraint's condition on an unsaved row, as SQL has it: True, False, or None
    (unknown: a NULL, or a lookup this does not evaluate — the database decides)."""
    if isinstance(node, Q):
        results = [_holds(child, obj) for child in node.children]
        if node.connector == Q.AND:
            value = False if False in results else None if None in results else True
        else:
            value = True if True in results else None if None in results else False
        return (None if value is None else not value) if node.negated else value
    lookup, expected = node
    name, _, op = lookup.partition("__")
    value = getattr(obj, obj._meta.get_field(name).attname)
    if isinstance(expected, F):
        expected = getattr(obj, obj._meta.get_field(expected.name).attname)
    if op == "isnull":
        return (value is None) == expected
    if value is None or expected is None:
        return None
    if isinstance(value, datetime) and isinstance(expected, datetime):
        value, expected = _aware(value), _aware(expected)
    try:
        return _LOOKUPS[op or "exact"](value, expected) if (op or "exact") in _LOOKUPS else None
    except (TypeError, re.error):
        return None


_LOOKUPS = {
    "exact": lambda v, e: v == e, "in": lambda v, e: v in e, "regex": lambda v, e: re.search(e, str(v)) is not None,
    "gt": lambda v, e: v > e, "gte": lambda v, e: v >= e, "lt": lambda v, e: v < e, "lte": lambda v, e: v <= e,
}


def _json_text(value) -> str | None:
    """The first text inside a JSON value (keys too) that cannot be stored (PostgreSQL's
    jsonb refuses NUL, no database takes a lone surrogate)."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, str) and (problem := _text(item)):
            return f"a text inside it {problem}"
    return None


@cache
def _columns(model) -> list[tuple]:
    """The columns an import fills (not the key, not the links it sets itself), and whether
    each may stay empty (nullable, or filled on save)."""
    return [(f, f.null or getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False))
            for f in model._meta.concrete_fields if not (f.primary_key or f.is_relation)]


def check_profile(pdata, position: int) -> None:
    """Refuse the profile's first bad record with a BadExport naming it and its field."""
    if not isinstance(pdata, dict):
        raise BadExport(f"profiles[{position}] is not an object")
    key = pdata.get("key")
    if not isinstance(key, str) or not PROFILE_KEY_RE.fullmatch(key):
        raise BadExport(f"profiles[{position}]: key {key!r:.80} is not a profile key (1-32 of a-z, 0-9, '_', '-')")
    for kind, fields in SCHEMA.items():
        records = pdata.get(kind) or []
        if not isinstance(records, list):
            raise BadExport(f"profile {key!r}: {kind} must be a list")
        for n, rec in enumerate(records):
            where = f"profile {key!r}, {kind}[{n}]"
            if not isinstance(rec, dict):
                raise BadExport(f"{where} is not an object")
            ident = next((rec[f] for f in ("mid", "hid", "eid", "rid", "key", "object_id", "slice")
                          if isinstance(rec.get(f), str)), None)
            if ident is not None:
                where += f" ({ident!r:.80})"
            for name, (required, check) in fields.items():
                if name not in rec:
                    if required:
                        raise BadExport(f"{where}: the field {name!r} is missing")
                    continue
                problem = check(rec[name])
                if problem:
                    raise BadExport(f"{where}: field {name!r}: {problem}")
    card = pdata.get("card")
    if card is not None and not (isinstance(card, dict) and _text(card.get("text") or "") is None):
        raise BadExport(f"profile {key!r}: card must be an object with a text")


def _local_clock(fields: dict) -> dict:
    """Period and day key from a closed set / a fixed shape (S5: they reach the prompt); another
    value (a legacy one) is kept in legacy_extra and the period derived from the hour."""
    extra = dict(fields.get("legacy_extra") or {})
    period = fields.get("period") or ""
    if period and period not in PERIOD_IDS:
        extra.setdefault("period", period)
        hour = fields.get("local_hour")
        fields["period"] = period_of(hour) if isinstance(hour, int) and 0 <= hour <= 23 else ""
    day = fields.get("local_day_key") or ""
    if day and not DAY_KEY_RE.fullmatch(day):
        extra.setdefault("local_day_key", day)
        fields["local_day_key"] = ""
    if extra:
        fields["legacy_extra"] = extra
    return fields


def import_full(*, data, user, dry_run: bool = False, progress: Callable[[str, int, int], None] | None = None) -> FullReport:
    """Import an export (a dict, or an `ExportFile` read as it streams) into `user`'s profiles;
    re-running it changes nothing (X2).

    S4 (issue 16): the whole file is checked first by a pass that only reads — no transaction,
    so no write lock — which is all the dry run (the data page's preview) does. The apply then
    writes in batches of PREVIOUSLY_IMPORT_BATCH_ROWS rows, each in its own short transaction,
    so another writer gets SQLite's lock between two; `progress` is called after each batch,
    outside any transaction. A database error part-way leaves the batches before it in place:
    as re-running skips what exists, running the same import again finishes it."""
    header, profiles = _open(data)
    checked = _each_profile(profiles, header, user=user, report=FullReport(dry_run=True), out=_Writes(),
                            progress=progress if dry_run else None)
    if dry_run:
        return checked
    out = _Writes(rows=settings.PREVIOUSLY_IMPORT_BATCH_ROWS, progress=progress)
    try:
        return _each_profile(profiles, header, user=user, report=FullReport(), out=out, progress=progress)
    except (DatabaseError, BadExport, BadFile, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ImportInterrupted(
            f"The import stopped while writing {out.kind or 'the profiles'} ({exc.__class__.__name__}: {exc})."
            f" The {out.batches:,} batches written before it are kept; import the same file again to finish:"
            " it skips what is already there and writes the rest."
        ) from exc


def _open(data) -> tuple[Header, Callable[[], Iterable]]:
    """The export's top level and a way to walk its profiles (again for each pass)."""
    if isinstance(data, ExportFile):
        try:
            return data.header(), data.profiles
        except BadFile as exc:
            raise BadExport(str(exc)) from None
    if not isinstance(data, dict):
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    profiles = data.get("profiles") or []
    count = len(profiles) if isinstance(profiles, list) else None
    return Header(members=data, profiles=count), lambda: profiles


def _each_profile(profiles: Callable[[], Iterable], header: Header, *, user, report: FullReport, out: "_Writes",
                  progress) -> FullReport:
    """One pass over the export: each profile checked (X4), then counted or written."""
    members = header.members
    if members.get("format") != FORMAT:
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    if members.get("version") != VERSION:
        raise BadExport(f"export version {members.get('version')!r} is not supported (this app reads {VERSION})")
    if header.profiles is None:
        raise BadExport("profiles must be a list")
    try:
        for position, pdata in enumerate(profiles()):
            check_profile(pdata, position)
            _import_profile(pdata, user=user, report=report, out=out)
            if progress:
                progress("profiles", position + 1, header.profiles)
    except BadFile as exc:
        raise BadExport(str(exc)) from None
    except (KeyError, TypeError, ValueError, OverflowError, IntegrityError, DataError) as exc:
        if out.write:
            raise
        # A value the database's own constraints refuse is as malformed as a missing key.
        raise BadExport(f"malformed export: {exc.__class__.__name__}: {exc}. Nothing was written.") from None
    return report


@dataclass
class _Writes:
    """Where an import's new rows go: nowhere (the checking pass, the dry run), or in batches
    of `rows`, each in its own transaction (S4); `kind` and `batches` say how far it got."""

    rows: int = 0  # 0: write nothing, check
    progress: Callable[[str, int, int], None] | None = None
    kind: str = ""
    batches: int = 0
    profile: str = ""  # the key of the profile being imported

    @property
    def write(self) -> bool:
        return self.rows > 0

    def batched(self, kind: str, items: list, write: Callable[[list], object]) -> None:
        """`write(batch)` for each batch of `items`, each committed on its own; when checking,
        every row is asked whether the database would take it (an item may hold several rows:
        a tuple of rows and lists of rows)."""
        if not self.write:
            for item in items:
                for row in _rows(item):
                    problem = storable(row)
                    if problem:
                        ident = next((getattr(row, f) for f in ("mid", "hid", "eid", "rid", "key", "object_id")
                                      if getattr(row, f, None)), "")
                        named = f" {ident!r:.80}" if ident else ""
                        raise BadExport(f"profile {self.profile!r}, {kind}{named}: {problem}")
            return
        self.kind = kind
        for start in range(0, len(items), self.rows):
            began = time.monotonic()
            with transaction.atomic():
                write(items[start:start + self.rows])
            self.batches += 1
            if connection.vendor == "sqlite":
                # A writer waiting for SQLite's lock polls it (the busy handler) at most every
                # 100 ms: a pause as long as the batch, up to that, lets it in between two.
                time.sleep(min(LOCK_POLL_SECONDS, time.monotonic() - began))
            if self.progress:
                self.progress(f"writing {kind}", min(start + self.rows, len(items)), len(items))

    def save(self, kind: str, model, objs: list) -> None:
        self.batched(kind, objs, model.objects.bulk_create)

    def one(self, kind: str, write: Callable[[], object], *rows) -> None:
        """A single write (the slices of loose lines, the card), checked like a batch's rows."""
        if self.write:
            self.kind = kind
            with transaction.atomic():
                write()
        else:
            self.batched(kind, list(rows), write)


def _rows(item) -> Iterator:
    if isinstance(item, (tuple, list)):
        for part in item:
            yield from _rows(part)
    else:
        yield item


@dataclass
class _Profile:
    """One profile being imported: its row, what it holds already (plus what this import
    adds, by id; pk None in the dry run) and the tombstones that block."""

    profile: Profile
    key: str
    report: FullReport
    out: _Writes
    tombs: set = field(default_factory=set)
    slices: dict = field(default_factory=dict)
    mids: dict = field(default_factory=dict)
    hids: dict = field(default_factory=dict)
    eids: dict = field(default_factory=dict)

    def add(self, kind: str, column: str) -> None:
        self.report.add(kind, column)


def _import_profile(pdata: dict, *, user, report: FullReport, out: _Writes) -> None:
    """One profile of the export. In the dry run nothing is saved: the profile may stay
    unsaved, so existing rows are looked up by `profile_id` (None: none)."""
    key = pdata["key"]
    if not isinstance(key, str) or not PROFILE_KEY_RE.fullmatch(key):
        raise ValueError(f"profile key {key!r} is invalid")
    defaults = {"name": pdata.get("name", ""), "persona": pdata.get("persona", ""),
                "language": pdata.get("language", "zh"), "proactive_enabled": pdata.get("proactive_enabled", True)}
    out.profile = key
    if out.write:
        out.kind = "the profile"
        with transaction.atomic():
            profile, _ = Profile.objects.get_or_create(user=user, key=key, defaults=defaults)
    else:
        profile = Profile.objects.filter(user=user, key=key).first() or Profile(user=user, key=key, **defaults)
        if profile.pk is None:
            out.one("the profile", None, profile)
    p = _Profile(profile=profile, key=key, report=report, out=out)
    for step in (_tombstones, _slices, _messages, _legacy_fragments, _highlights, _experiences, _relations,
                 _legacy_meta, _card, _card_snapshots, _favourites):
        step(p, pdata)


def _tombstones(p: _Profile, pdata: dict) -> None:
    """Tombstones first: the file's are imported, then block what they name."""
    p.tombs = set(Tombstone.objects.filter(profile_id=p.profile.pk).values_list("kind", "object_id"))
    new = []
    for t in pdata.get("tombstones", []):
        p.add("tombstones", "read")
        ident = (t["kind"], t["object_id"])
        if ident in p.tombs:
            p.add("tombstones", "existing")
            continue
        p.tombs.add(ident)
        new.append(Tombstone(
            profile=p.profile, kind=t["kind"], object_id=t["object_id"], deleted_at=_dt(t["deleted_at"]),
            expires_at=_dt(t["expires_at"]), content_hash=t.get("content_hash") or "",
            created_at=_dt(t.get("created_at")), legacy_key=t.get("legacy_key") or "",
            legacy_extra=t.get("legacy_extra") or {},
        ))
        p.add("tombstones", "created")
    p.out.save("tombstones", Tombstone, new)


def _slices(p: _Profile, pdata: dict) -> None:
    p.slices = {s.key: s for s in Slice.objects.filter(profile_id=p.profile.pk)}
    new = []
    for s in pdata.get("slices", []):
        p.add("slices", "read")
        if s["key"] in p.slices:
            p.add("slices", "existing")
            continue
        obj = Slice(profile=p.profile, key=s["key"], started_at=_dt(s["started_at"]),
                    last_message_at=_dt(s["last_message_at"]), ended_at=_dt(s.get("ended_at")),
                    close_reason=s.get("close_reason") or "", tz=s.get("tz") or "UTC",
                    injected_card=s.get("injected_card"))
        p.slices[s["key"]] = obj
        new.append(obj)
        p.add("slices", "created")
    p.out.save("slices", Slice, new)


MESSAGE_COLUMNS = ("mid", "speaker", "message_type", "content", "raw_content", "status", "local_day_key", "local_hour",
                   "period", "tz", "source_id", "sync_status", "attachment", "legacy_key", "content_hash", "legacy_extra")


def _messages(p: _Profile, pdata: dict) -> None:
    """New lines in their slices (a line the file gives none joins one by the idle gap, S1),
    indexed for recall in the batch that writes them (D3)."""
    p.mids = dict(Message.objects.filter(profile_id=p.profile.pk).values_list("mid", "pk"))
    new, loose = [], []
    for m in pdata.get("messages", []):
        p.add("messages", "read")
        if ("msg", m["mid"]) in p.tombs:
            p.add("messages", "tombstoned")
            p.report.notes.append(f"{p.key}: message {m['mid']} is tombstoned; skipped")
            continue
        if m["mid"] in p.mids:
            p.add("messages", "existing")
            continue
        fields = _local_clock({f: m[f] for f in MESSAGE_COLUMNS if f in m})
        obj = Message(profile=p.profile, created_at=_dt(m["created_at"]), deleted_at=_dt(m.get("deleted_at")), **fields)
        slice_ = p.slices.get(m.get("slice"))
        if slice_ is None:
            loose.append(obj)
        else:
            obj.slice = slice_
        p.mids[obj.mid] = None
        new.append(obj)
        p.add("messages", "created")
    # The slices for loose lines go in first, in one transaction (far fewer rows than lines).
    p.out.one("message slices", lambda: assign_slices(profile=p.profile, messages=loose))
    p.out.batched("messages", new, _write_messages)
    if p.out.write and new:
        p.out.one("the recall index", optimize_index)
    p.mids.update((m.mid, m.pk) for m in new)


def _write_messages(batch: list) -> None:
    Message.objects.bulk_create(batch)
    index_messages(batch, new=True)


def _legacy_fragments(p: _Profile, pdata: dict) -> None:
    rows = LegacyFragment.objects.filter(profile_id=p.profile.pk)
    keys = set(rows.values_list("key", flat=True))
    prints = set(rows.values_list("fingerprint", flat=True))
    new = []
    for f in pdata.get("legacy_fragments", []):
        p.add("legacy_fragments", "read")
        if f["key"] in keys or (f["fingerprint"] in prints and f["disposition"] != "duplicate"):
            p.add("legacy_fragments", "existing")
            continue
        if ("mem", f["key"]) in p.tombs:
            p.add("legacy_fragments", "tombstoned")
            continue
        keys.add(f["key"])
        prints.add(f["fingerprint"])
        new.append(LegacyFragment(
            profile=p.profile, message_id=p.mids.get(f.get("mid")) if f.get("mid") else None,
            **{k: f[k] for k in ("key", "role", "content", "ts", "day_key", "hour", "period", "disposition",
                                 "fingerprint", "legacy_extra")},
        ))
        p.add("legacy_fragments", "created")
    p.out.save("legacy fragments", LegacyFragment, new)


def _highlights(p: _Profile, pdata: dict) -> None:
    p.hids = dict(Highlight.objects.filter(profile_id=p.profile.pk).values_list("hid", "pk"))
    new = []
    for h in pdata.get("highlights", []):
        p.add("highlights", "read")
        if ("hl", h["hid"]) in p.tombs:
            p.add("highlights", "tombstoned")
            continue
        if h["hid"] in p.hids:
            p.add("highlights", "existing")
            continue
        message_id = p.mids.get(h["mid"])
        flagged = h.get("flagged") or ("" if message_id else f"message {h['mid']} is missing")
        new.append(Highlight(
            profile=p.profile, hid=h["hid"], message_id=message_id, mid=h["mid"], content=h["content"],
            source=h.get("source") or "import", created_at=_dt(h["created_at"]), deleted_at=_dt(h.get("deleted_at")),
            flagged=flagged, legacy_key=h.get("legacy_key") or "", legacy_extra=h.get("legacy_extra") or {},
        ))
        p.hids[h["hid"]] = None
        p.add("highlights", "created")
    p.out.save("highlights", Highlight, new)
    p.hids.update((h.hid, h.pk) for h in new)


def _experiences(p: _Profile, pdata: dict) -> None:
    """Experiences with their sources and history, written together (a batch is whole)."""
    p.eids = dict(Experience.objects.filter(profile_id=p.profile.pk).values_list("eid", "pk"))
    new = []
    for e in pdata.get("experiences", []):
        p.add("experiences", "read")
        if ("exp", e["eid"]) in p.tombs:
            p.add("experiences", "tombstoned")
            continue
        if e["eid"] in p.eids:
            p.add("experiences", "existing")
            continue
        obj = Experience(
            profile=p.profile, eid=e["eid"], title=e["title"], content=e["content"], status=e["status"],
            time_certainty=e["time_certainty"], event_time=_dt(e.get("event_time")),
            event_time_text=e.get("event_time_text") or "", recorded_at=_dt(e["recorded_at"]),
            invalid_at=_dt(e.get("invalid_at")), deleted_at=_dt(e.get("deleted_at")), flagged=e.get("flagged") or "",
            legacy_key=e.get("legacy_key") or "", legacy_extra=e.get("legacy_extra") or {},
        )
        sources = [ExperienceSource(experience=obj, mid=mid, message_id=p.mids.get(mid), position=pos)
                   for pos, mid in enumerate(dict.fromkeys(e.get("source_mids", [])))]
        history = [ExperienceHistory(experience=obj, actor=h["actor"], action=h["action"], before=h.get("before"),
                                     after=h.get("after"), reason=h.get("reason") or "") for h in e.get("history", [])]
        new.append((obj, sources, history))
        p.eids[e["eid"]] = None
        p.add("experiences", "created")
    p.out.batched("experiences", new, _write_experiences)
    p.eids.update((o.eid, o.pk) for o, _, _ in new)


def _write_experiences(batch: list) -> None:
    Experience.objects.bulk_create([o for o, _, _ in batch])
    ExperienceSource.objects.bulk_create([s for _, sources, _ in batch for s in sources])
    ExperienceHistory.objects.bulk_create([h for _, _, history in batch for h in history])


def _relations(p: _Profile, pdata: dict) -> None:
    rids = set(Relation.objects.filter(profile_id=p.profile.pk).values_list("rid", flat=True))
    new = []
    for r in pdata.get("relations", []):
        p.add("relations", "read")
        if ("rel", r["rid"]) in p.tombs:
            p.add("relations", "tombstoned")
            continue
        if r["rid"] in rids:
            p.add("relations", "existing")
            continue
        rids.add(r["rid"])
        new.append(_relation(p, r))
        p.add("relations", "created")
    p.out.save("relations", Relation, new)


def _relation(p: _Profile, r: dict) -> Relation:
    """A relation with its ends found among the highlights, else the experiences."""
    obj = Relation(
        profile=p.profile, rid=r["rid"], type=r["type"], from_id=r["from_id"], to_id=r["to_id"],
        from_highlight_id=p.hids.get(r["from_id"]), to_highlight_id=p.hids.get(r["to_id"]),
        created_at=_dt(r["created_at"]), deleted_at=_dt(r.get("deleted_at")), flagged=r.get("flagged") or "",
        legacy_key=r.get("legacy_key") or "", legacy_extra=r.get("legacy_extra") or {},
    )
    obj.from_experience_id = None if obj.from_highlight_id else p.eids.get(r["from_id"])
    obj.to_experience_id = None if obj.to_highlight_id else p.eids.get(r["to_id"])
    if not obj.flagged and not ((obj.from_highlight_id or obj.from_experience_id)
                                and (obj.to_highlight_id or obj.to_experience_id)):
        obj.flagged = "missing end"
    return obj


def _legacy_meta(p: _Profile, pdata: dict) -> None:
    keys = set(LegacyMeta.objects.filter(profile_id=p.profile.pk).values_list("key", flat=True))
    new = []
    for m in pdata.get("legacy_meta", []):
        p.add("legacy_meta", "read")
        if m["key"] in keys:
            p.add("legacy_meta", "existing")
            continue
        keys.add(m["key"])
        new.append(LegacyMeta(profile=p.profile, key=m["key"], value=m.get("value") or "",
                              expiration=m.get("expiration"), metadata=m.get("metadata")))
        p.add("legacy_meta", "created")
    p.out.save("legacy meta", LegacyMeta, new)


def _card(p: _Profile, pdata: dict) -> None:
    """The file's card, unless the profile has one with text (an empty row takes it)."""
    card = pdata.get("card")
    if not card:
        return
    p.add("card", "read")
    existing = Card.objects.filter(profile_id=p.profile.pk).first()
    if existing is not None and existing.text.strip():
        p.add("card", "existing")
        return
    if existing is not None:  # an empty row (opening /card/ makes one) takes the card
        existing.text, existing.format = card.get("text") or "", card.get("format") or "v5"
        existing.version = max(existing.version, card.get("version") or 0)
        p.out.one("the card", lambda: existing.save(update_fields=["text", "format", "version", "updated_at"]),
                  existing)
    else:
        new = Card(profile=p.profile, text=card.get("text") or "", format=card.get("format") or "v5",
                   version=card.get("version") or 0)
        p.out.one("the card", new.save, new)
    p.add("card", "created")


def _card_snapshots(p: _Profile, pdata: dict) -> None:
    have = set(CardSnapshot.objects.filter(profile_id=p.profile.pk).values_list("slice__key", flat=True))
    new = []
    for s in pdata.get("card_snapshots", []):
        p.add("card_snapshots", "read")
        if s["slice"] in have or s["slice"] not in p.slices:
            p.add("card_snapshots", "existing")
            continue
        have.add(s["slice"])
        new.append(CardSnapshot(profile=p.profile, slice=p.slices[s["slice"]], text=s.get("text") or "",
                                card_version=s.get("card_version") or 0))
        p.add("card_snapshots", "created")
    p.out.save("card snapshots", CardSnapshot, new)


def _favourites(p: _Profile, pdata: dict) -> None:
    have = set(Favourite.objects.filter(profile_id=p.profile.pk).values_list("message__mid", "excerpt"))
    new = []
    for f in pdata.get("favourites", []):
        p.add("favourites", "read")
        if (f["mid"], f.get("excerpt") or "") in have or f["mid"] not in p.mids:
            p.add("favourites", "tombstoned" if ("msg", f["mid"]) in p.tombs else "existing")
            continue
        have.add((f["mid"], f.get("excerpt") or ""))
        new.append(Favourite(profile=p.profile, message_id=p.mids[f["mid"]], excerpt=f.get("excerpt") or "",
                             highlight_id=p.hids.get(f.get("hid"))))
        p.add("favourites", "created")
    p.out.save("favourites", Favourite, new)


def counts_by_kind(report: FullReport) -> dict:
    """kind -> created (the dry-run preview's headline numbers)."""
    out = defaultdict(int)
    for kind, c in report.counts.items():
        out[kind] = c["created"]
    return dict(out)
