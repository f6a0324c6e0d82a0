"""Legacy KV migration (SPEC X3, X4, X5; LEGACY_KV.md rules 1-9).

Three phases, so nothing is written unless everything read well:
1. read: stream the dump, classify each key, parse and validate its value;
2. plan: tombstones first, then messages (msg: merged with their mem: fragments),
   then highlights, experiences, relations, meta keys, against what the database
   already holds (prefetched as sets, so a re-import plans nothing);
3. write: one transaction, bulk inserts in batches (messages and fragments, the big
   tables, through one-row executemany: see bulk_insert).
"""

import base64
import binascii
import gc
import hashlib
import json
import re
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import IO, Any

try:
    import orjson
except ImportError:  # pragma: no cover - a declared dependency; the json module is the fallback
    orjson = None
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from memory.clock import period_of
from memory.hashing import content_hash, str_hash
from memory.interop import legacy_shapes as shapes
from memory.interop.bulk_insert import InstanceFactory, bulk_insert
from memory.interop.dump_reader import DumpEntry, DumpFormatError, read_dump
from memory.interop.markers import clean_markers, loose
from memory.models import (
    Experience,
    ExperienceHistory,
    ExperienceSource,
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
    DEFAULT_PROFILE_KEY,
    LEGACY_V0_PREFIX,
    PROFILE_KEY_RE,
    legacy_readable,
)
from memory.models.deletion import tombstone_expiry
from memory.recall.index import index_messages, optimize_index

# "Timestamps within a few seconds" (rules 1 and 4).
MATCH_WINDOW_MS = 5_000
BATCH = 1000
FAMILIES = ("tomb", "msg", "mem", "mem_", "hl", "exp", "rel", "meta", "unknown")
COLUMNS = (
    "read",
    "created",
    "existing",
    "merged",
    "duplicate",
    "tombstoned",
    "soft_deleted",
    "flagged",
    "errors",
)
ID_MAX = 64
KEY_MAX = 300
SPEAKERS = {"user": "user", "assistant": "assistant", "ai": "assistant", "system": "system"}
TOMB_KINDS = {k.value for k in Tombstone.Kind}
MESSAGE_TYPES = frozenset(Message.Type.values)
TIME_CERTAINTIES = frozenset(Experience.TimeCertainty.values)
RELATION_TYPES = frozenset(Relation.Type.values)


class BadRecord(ValueError):
    """A record that cannot be imported; `key` names it (rule 8)."""

    def __init__(self, key: str, problem: str):
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}")


class BadDump(Exception):
    """The dump cannot be imported; nothing was written."""


@dataclass
class Report:
    """The final table (rule 9) and every anomaly, one line each."""

    counts: dict = field(default_factory=lambda: {f: dict.fromkeys(COLUMNS, 0) for f in FAMILIES})
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    def add(self, family: str, column: str, n: int = 1) -> None:
        self.counts[family][column] += n

    def note(self, text: str) -> None:
        self.notes.append(text)

    def rows(self) -> list[tuple[str, dict]]:
        return [(f, c) for f, c in self.counts.items() if any(c.values())]

    def as_dict(self) -> dict:
        totals = dict.fromkeys(COLUMNS, 0)
        for _f, c in self.rows():
            for col in COLUMNS:
                totals[col] += c[col]
        return {
            "dry_run": self.dry_run,
            "families": dict(self.rows()),
            "total": totals,
            "notes": self.notes,
        }

    def table(self) -> str:
        head = ["family", *COLUMNS]
        body = [[f, *(str(c[col]) for col in COLUMNS)] for f, c in self.rows()]
        totals = self.as_dict()["total"]
        body.append(["total", *(str(totals[col]) for col in COLUMNS)])
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

        def line(r):
            return "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))

        return "\n".join([line(head), line(["-" * w for w in widths]), *(line(r) for r in body)])


Progress = Callable[[str, int, int], None]


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


# --------------------------------------------------------------------------- read


@dataclass(slots=True)
class Rec:
    """One parsed legacy record: its family, key, profile and columns."""

    family: str
    key: str
    profile: str
    rid: str  # the id part of the key (mid, hid, eid, rid, fragment id, tomb id)
    cols: dict
    extra: dict
    tkind: str = ""  # tombstones: the kind they name


_KEY_RE = re.compile(r"^(msg|hl|exp|rel|tomb|mem):([^:]*):(.+)\Z", re.DOTALL)
_STR_HASH_RE = re.compile(r"[0-9a-f]{1,8}")
_valid_profiles: dict[str, bool] = {}


def _has_float(value: dict | list) -> bool:
    for x in value.values() if value.__class__ is dict else value:
        c = x.__class__
        if c is float or ((c is dict or c is list) and _has_float(x)):
            return True
    return False


def loads_value(text: str) -> Any:
    """json.loads(text), computed by orjson where that gives the very same value.

    orjson rejects what it cannot represent exactly (NaN, 1e400, lone surrogates) and
    reads integers beyond 64 bits as floats; for those, and for anything holding a float,
    the json module decides, so values, errors and their messages are the json module's.
    """
    if orjson is None:
        return json.loads(text)
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    c = value.__class__
    if c is float or ((c is dict or c is list) and _has_float(value)):
        return json.loads(text)
    return value


def resolve_profile(segment: str | None, key: str, report: Report | None) -> str:
    """The profile key, or `owner` when the segment fails the regex (rule 5, P1)."""
    if segment is not None:
        valid = _valid_profiles.get(segment)
        if valid is None:
            valid = _valid_profiles.setdefault(segment, PROFILE_KEY_RE.match(segment) is not None)
        if valid:
            return segment
    if report is not None:
        report.note(f"profile fallback: {key}: profile {segment!r} is not a valid key; imported under 'owner'")
    return DEFAULT_PROFILE_KEY


def family_of(key: str) -> str:
    if key.startswith("mem_"):
        return "mem_"
    if key.startswith("meta_"):
        return "meta"
    m = _KEY_RE.match(key)
    return m.group(1) if m else "unknown"


def decode_value(entry: DumpEntry) -> str:
    value = entry.value
    if entry.base64:
        try:
            value = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
            raise BadRecord(entry.key, "value is marked base64 but does not decode to UTF-8 text") from None
    return value


def kv_attrs(entry: DumpEntry) -> dict:
    """The KV entry's own attributes, kept for export (expiration, ttl, metadata, base64)."""
    kv = {}
    if entry.expiration is not None:
        try:
            shapes.parse_expiration(entry.expiration)
        except shapes.BadValue as exc:
            raise BadRecord(entry.key, str(exc)) from None
        kv["expiration"] = entry.expiration
    if entry.expiration_ttl is not None:
        kv["expiration_ttl"] = entry.expiration_ttl
    if entry.metadata is not None:
        kv["metadata"] = entry.metadata
    if entry.base64:
        kv["base64"] = True
    kv.update(entry.extra)
    return kv


def parse_entry(entry: DumpEntry, report: Report, family: str | None = None) -> Rec:
    """Classify and validate one dump entry; raises BadRecord naming the key."""
    key = entry.key
    if entry.problem:
        raise BadRecord(key, entry.problem)
    if len(key) > KEY_MAX:
        raise BadRecord(key[:80] + "…", f"key is longer than {KEY_MAX} characters")
    if family is None:
        family = family_of(key)
    if family == "unknown":
        raise BadRecord(key, "unknown key family (expected msg:, mem:, mem_, hl:, exp:, rel:, tomb: or meta_)")
    text = decode_value(entry)
    kv = kv_attrs(entry)
    if family == "meta":
        name, sep, rest = key.partition(":")
        profile = resolve_profile(rest.split(":", 1)[0], key, report) if sep else ""
        if name == "meta_lastTs" and not text.strip().lstrip("-").isdigit():
            raise BadRecord(key, f"meta_lastTs must be an integer (epoch ms), not {text[:40]!r}")
        return Rec("meta", key, profile, "", {"value": text}, {shapes.KV: kv} if kv else {})
    try:
        value = loads_value(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise BadRecord(key, f"value does not parse as JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadRecord(key, f"value must be a JSON object, not {type(value).__name__}")
    if family == "mem_":
        profile, rid, shape = DEFAULT_PROFILE_KEY, key[len("mem_") :], "mem"
    else:
        m = _KEY_RE.match(key)
        profile = resolve_profile(m.group(2), key, report)
        rid, shape = m.group(3), family
    try:
        cols, extra = shapes.read_value(shape, value)
    except shapes.BadValue as exc:
        raise BadRecord(key, str(exc)) from None
    if kv:
        extra[shapes.KV] = kv
    rec = Rec(family, key, profile, rid, cols, extra)
    _validate(rec)
    return rec


def _require(rec: Rec, *columns: str) -> None:
    for col in columns:
        if rec.cols.get(col) in (None, ""):
            raise BadRecord(rec.key, f"{col} is missing")


def _check_id(rec: Rec, value: str, what: str) -> None:
    if not value or len(value) > ID_MAX:
        raise BadRecord(rec.key, f"{what} {value[:80]!r} must be 1-{ID_MAX} characters")


def _validate(rec: Rec) -> None:
    c = rec.cols
    if rec.family == "msg":
        _require(rec, "speaker", "created_at")
        _check_id(rec, rec.rid, "message id")
        if c["speaker"] not in SPEAKERS:
            raise BadRecord(rec.key, f"speaker {c['speaker']!r} is not user or assistant")
        c["speaker"] = SPEAKERS[c["speaker"]]
        if c["message_type"] not in MESSAGE_TYPES:
            # Keep unknown legacy types as text; the original spelling stays in legacy_extra.
            rec.extra.setdefault("message_type", c["message_type"])
            c["message_type"] = Message.Type.TEXT
        if c["content_hash"] and not _STR_HASH_RE.fullmatch(c["content_hash"]):
            raise BadRecord(rec.key, f"content_hash {c['content_hash']!r} is not a strHash")
        if c["attachment"] is not None and not isinstance(c["attachment"], dict):
            raise BadRecord(rec.key, "attachment must be an object or null")
    elif rec.family in ("mem", "mem_"):
        _require(rec, "role", "ts")
        if c["role"] not in SPEAKERS:
            raise BadRecord(rec.key, f"role {c['role']!r} is not user or assistant")
        if c["hour"] is not None and not 0 <= c["hour"] <= 23:
            raise BadRecord(rec.key, f"hour {c['hour']} is not 0-23")
        if len(c["day_key"]) > 10:
            raise BadRecord(rec.key, f"day_key {c['day_key']!r} is not YYYY-MM-DD")
        if len(c["period"]) > 16:
            rec.extra.setdefault("period", c["period"])
            c["period"] = ""
    elif rec.family == "hl":
        _require(rec, "mid", "created_at")
        _check_id(rec, rec.rid, "highlight id")
        _check_id(rec, c["mid"], "mid")
    elif rec.family == "exp":
        _require(rec, "title", "recorded_at")
        _check_id(rec, rec.rid, "experience id")
        if len(c["title"]) > 300:
            raise BadRecord(rec.key, "title is longer than 300 characters")
        if c["status"] not in ("active", "candidate", "rejected"):
            raise BadRecord(rec.key, f"status {c['status']!r} is not active or candidate")
        mids = c["source_mids"]
        if mids is None:
            c["source_mids"] = []
        elif not isinstance(mids, list) or not all(isinstance(x, str) and 0 < len(x) <= ID_MAX for x in mids):
            raise BadRecord(rec.key, "source_mids must be a list of message ids")
        if c["time_certainty"] not in TIME_CERTAINTIES:
            rec.extra.setdefault("time_certainty", c["time_certainty"])
            c["time_certainty"] = Experience.TimeCertainty.UNKNOWN
        text = c["event_time_text"] or ""
        c["event_time"] = None
        if text:
            try:
                c["event_time"] = shapes.parse_time(text, "event_time")
            except shapes.BadValue:
                pass  # free text such as "去年夏天" stays text
        if len(text) > 100:
            rec.extra.setdefault("event_time", text)
            c["event_time_text"] = text[:100]
    elif rec.family == "rel":
        _require(rec, "from_id", "to_id", "type")
        _check_id(rec, rec.rid, "relation id")
        _check_id(rec, c["from_id"], "from_id")
        _check_id(rec, c["to_id"], "to_id")
        if c["type"] not in RELATION_TYPES:
            raise BadRecord(rec.key, f"type {c['type']!r} is not one of {', '.join(Relation.Type.values)}")
    elif rec.family == "tomb":
        kind, sep, oid = rec.rid.partition(":")
        if not sep or kind not in TOMB_KINDS or not oid:
            raise BadRecord(rec.key, "a tombstone key is tomb:<profile>:<msg|hl|exp|rel|mem>:<id>")
        if len(oid) > 128:
            raise BadRecord(rec.key, "tombstoned id is longer than 128 characters")
        _require(rec, "deleted_at")
        rec.tkind, rec.rid = kind, oid
        if c["content_hash"] and not _STR_HASH_RE.fullmatch(c["content_hash"]):
            raise BadRecord(rec.key, f"content_hash {c['content_hash']!r} is not a strHash")


def read_records(
    fh: IO[str], *, skip_bad: bool, report: Report, progress: Progress = _no_progress
) -> dict[str, list[Rec]]:
    """Parse the whole dump into records by family; BadDump on the first bad one unless skip_bad."""
    by_family: dict[str, list[Rec]] = defaultdict(list)
    seen = 0
    try:
        for entry in read_dump(fh):
            seen += 1
            fam = family_of(entry.key)
            report.add(fam, "read")
            try:
                rec = parse_entry(entry, report, fam)
            except BadRecord as exc:
                if not skip_bad:
                    raise BadDump(f"bad record {exc.key}: {exc.problem}. Nothing was written.") from None
                report.add(fam, "errors")
                report.note(f"skipped bad record {exc.key}: {exc.problem}")
                continue
            by_family[rec.family].append(rec)
            if seen % 5000 == 0:
                progress("reading", seen, 0)
    except DumpFormatError as exc:
        raise BadDump(f"malformed dump {exc}. Nothing was written.") from None
    progress("reading", seen, seen)
    return by_family


# --------------------------------------------------------------------------- plan


def fragment_mid(key: str, role: str, ts: int) -> str:
    """The deterministic message id of a fragment with no msg: twin (rule 1)."""
    digest = hashlib.sha1(key.encode("utf-8")).hexdigest()
    if SPEAKERS[role] == "assistant":
        return f"a_{ts}_{digest[:8]}"
    return f"c_{digest[:16]}"


def fingerprint(content: str, ts: int) -> str:
    """X2's raw-fragment `content|ts` fingerprint, hashed to fit a column."""
    return hashlib.sha1(f"{content}|{ts}".encode()).hexdigest()


def ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


@dataclass
class Existing:
    """What the database already holds for one profile: ids only, so a re-import plans nothing."""

    profile: Profile | None
    mids: dict = field(default_factory=dict)  # mid -> pk
    fragment_keys: set = field(default_factory=set)
    hids: dict = field(default_factory=dict)
    eids: dict = field(default_factory=dict)
    rids: set = field(default_factory=set)
    tombs: set = field(default_factory=set)  # (kind, object_id)
    msg_tombs: dict = field(default_factory=lambda: defaultdict(list))  # content_hash -> [created ms]
    meta_keys: set = field(default_factory=set)

    @classmethod
    def load(cls, profile: Profile | None) -> "Existing":
        ex = cls(profile)
        if profile is None:
            return ex
        ex.mids = dict(Message.objects.filter(profile=profile).values_list("mid", "pk"))
        ex.fragment_keys = set(LegacyFragment.objects.filter(profile=profile).values_list("key", flat=True))
        ex.hids = dict(Highlight.objects.filter(profile=profile).values_list("hid", "pk"))
        ex.eids = dict(Experience.objects.filter(profile=profile).values_list("eid", "pk"))
        ex.rids = set(Relation.objects.filter(profile=profile).values_list("rid", flat=True))
        for kind, oid, chash, created in Tombstone.objects.filter(profile=profile).values_list(
            "kind", "object_id", "content_hash", "created_at"
        ):
            ex.tombs.add((kind, oid))
            if kind == Tombstone.Kind.MESSAGE and chash and created:
                ex.msg_tombs[chash].append(ms(created))
        ex.meta_keys = set(LegacyMeta.objects.filter(profile=profile).values_list("key", flat=True))
        return ex


@dataclass
class ProfilePlan:
    key: str
    existing: Existing
    tombs: list = field(default_factory=list)
    messages: list = field(default_factory=list)  # Message instances without slice
    fragments: list = field(default_factory=list)  # (LegacyFragment instance, mid or None)
    highlights: list = field(default_factory=list)  # (Highlight, mid)
    experiences: list = field(default_factory=list)  # (Experience, [mids])
    relations: list = field(default_factory=list)  # (Relation, from_id, to_id)
    meta: list = field(default_factory=list)
    tz_offset_hours: int = 0


def plan_import(by_family: dict[str, list[Rec]], *, user, report: Report, progress: Progress = _no_progress) -> dict:
    """Decide, per profile, what to create; counts go to the report. Writes nothing."""
    profiles: dict[str, ProfilePlan] = {}
    existing_profiles = {p.key: p for p in Profile.objects.filter(user=user)} if user else {}

    def plan_for(key: str) -> ProfilePlan:
        if key not in profiles:
            profiles[key] = ProfilePlan(key, Existing.load(existing_profiles.get(key)))
        return profiles[key]

    global_meta: list[Rec] = []
    for fam in ("tomb", "msg", "mem", "mem_", "hl", "exp", "rel"):
        for rec in by_family.get(fam, ()):
            plan_for(rec.profile)
    for rec in by_family.get("meta", ()):
        if rec.profile:
            plan_for(rec.profile)
        else:
            global_meta.append(rec)

    # Rule 4: tombstones first -- the dump's and the database's both block.
    for rec in by_family.get("tomb", ()):
        p = plan_for(rec.profile)
        ident = (rec.tkind, rec.rid)
        if ident in p.existing.tombs:
            report.add("tomb", "existing")
            continue
        p.existing.tombs.add(ident)
        c = rec.cols
        if rec.tkind == "msg" and c["content_hash"] and c["created_at"]:
            p.existing.msg_tombs[c["content_hash"]].append(ms(c["created_at"]))
        expires = tombstone_expiry(c["deleted_at"])
        kv_exp = (rec.extra.get(shapes.KV) or {}).get("expiration")
        if kv_exp is not None:
            at = datetime.fromtimestamp(shapes.parse_expiration(kv_exp), tz=UTC)
            if at > c["deleted_at"]:
                expires = at
        p.tombs.append(
            Tombstone(
                kind=rec.tkind,
                object_id=rec.rid,
                deleted_at=c["deleted_at"],
                expires_at=expires,
                content_hash=c["content_hash"] or "",
                created_at=c["created_at"],
                legacy_key=rec.key,
                legacy_extra=rec.extra,
            )
        )
        report.add("tomb", "created")
    progress("planning", 1, 5)

    contents: dict[tuple[str, str], str] = {}  # (profile, mid) -> content, for highlight checks
    _plan_messages(by_family, plan_for, report, contents)
    progress("planning", 2, 5)
    _plan_highlights(by_family, plan_for, report, contents)
    _plan_experiences(by_family, plan_for, report)
    _plan_relations(by_family, plan_for, report, contents)
    progress("planning", 4, 5)

    for rec in by_family.get("meta", ()):
        p = profiles.get(rec.profile) if rec.profile else None
        keys = p.existing.meta_keys if p else _global_meta_keys()
        if rec.key in keys:
            report.add("meta", "existing")
            continue
        keys.add(rec.key)
        kv = rec.extra.get(shapes.KV) or {}
        exp = kv.get("expiration")
        meta = LegacyMeta(
            key=rec.key,
            value=rec.cols["value"],
            expiration=shapes.parse_expiration(exp) if exp is not None else None,
            metadata=_meta_metadata(kv),
        )
        if p is not None:
            p.meta.append(meta)
        else:
            plan_for("\0global").meta.append(meta)
        report.add("meta", "created")
        if not rec.key.startswith("meta_lastTs:"):
            report.note(f"meta key kept verbatim: {rec.key}")
    progress("planning", 5, 5)
    return profiles


_GLOBAL_META: set | None = None


def _global_meta_keys() -> set:
    global _GLOBAL_META
    if _GLOBAL_META is None:
        _GLOBAL_META = set(LegacyMeta.objects.filter(profile__isnull=True).values_list("key", flat=True))
    return _GLOBAL_META


def _meta_metadata(kv: dict) -> Any:
    """LegacyMeta.metadata holds the KV metadata; other KV attributes ride along under _kv."""
    rest = {k: v for k, v in kv.items() if k not in ("expiration", "metadata")}
    if "expiration" in kv and not isinstance(kv["expiration"], int):
        rest["expiration"] = kv["expiration"]  # an ISO spelling, kept as written
    if not rest:
        return kv.get("metadata")
    return {"metadata": kv.get("metadata"), shapes.KV: rest}


def _infer_offset(frags: Iterable[Rec]) -> int:
    """The profile's usual UTC offset in hours, from the fragments' local day_key + hour."""
    votes: Counter = Counter()
    for i, rec in enumerate(frags):
        if i > 2000:
            break
        c = rec.cols
        if c["hour"] is None or not c["day_key"]:
            continue
        try:
            local = datetime.strptime(c["day_key"], "%Y-%m-%d").replace(hour=c["hour"], tzinfo=UTC)
        except ValueError:
            continue
        utc = datetime.fromtimestamp(c["ts"] / 1000, tz=UTC).replace(minute=0, second=0, microsecond=0)
        off = round((local - utc).total_seconds() / 3600)
        if -12 <= off <= 14:
            votes[off] += 1
    return votes.most_common(1)[0][0] if votes else 0


_new_message = InstanceFactory(Message)
_new_fragment = InstanceFactory(LegacyFragment)


def _plan_messages(by_family, plan_for, report: Report, contents: dict) -> None:
    """Rules 1-4: msg: records, their mem: twins, orphan fragments, duplicates, tombstones."""
    frags_by_profile: dict[str, list[Rec]] = defaultdict(list)
    for fam in ("mem", "mem_"):
        for rec in by_family.get(fam, ()):
            frags_by_profile[rec.profile].append(rec)
    msgs_by_profile: dict[str, list[Rec]] = defaultdict(list)
    for rec in by_family.get("msg", ()):
        msgs_by_profile[rec.profile].append(rec)

    for pkey in set(frags_by_profile) | set(msgs_by_profile):
        p = plan_for(pkey)
        ex = p.existing
        p.tz_offset_hours = _infer_offset(frags_by_profile.get(pkey, ()))
        # msg: index for merging: (speaker, loose content) -> [(created ms, rec, tombstoned)]
        index: dict[tuple[str, str], list] = defaultdict(list)
        planned: dict[str, Message] = {}
        seen_mids: set[str] = set()
        for rec in msgs_by_profile.get(pkey, ()):
            c = rec.cols
            mid = rec.rid
            tombstoned = ("msg", mid) in ex.tombs
            index[(c["speaker"], loose(c["content"]))].append([ms(c["created_at"]), rec, tombstoned, mid, 0])
            if mid in seen_mids:
                report.add("msg", "duplicate")
                report.note(f"duplicate key for message {mid}: {rec.key}")
                continue
            seen_mids.add(mid)
            if tombstoned:
                report.add("msg", "tombstoned")
                continue
            if mid in ex.mids:
                report.add("msg", "existing")
                continue
            contents[(pkey, mid)] = c["content"]
            msg = _new_message(
                mid=mid,
                speaker=c["speaker"],
                message_type=c["message_type"],
                content=c["content"],
                created_at=c["created_at"],
                source_id=c["source_id"] or "",
                sync_status=c["sync_status"] or "",
                deleted_at=c["deleted_at"],
                attachment=c["attachment"],
                legacy_key=rec.key,
                content_hash=c["content_hash"] or content_hash(pkey, c["content"]),
                legacy_extra=rec.extra,
            )
            planned[mid] = msg
            p.messages.append(msg)
            report.add("msg", "created")
            if msg.deleted_at is not None:
                report.add("msg", "soft_deleted")

        for entries in index.values():
            entries.sort(key=lambda e: e[0])
        fingerprints: dict[str, str | None] = {}  # fingerprint -> mid the first fragment went to
        fam_of = {True: "mem_", False: "mem"}
        for rec in sorted(frags_by_profile.get(pkey, ()), key=lambda r: (r.cols["ts"], r.key)):
            fam = fam_of[rec.family == "mem_"]
            c = rec.cols
            role = SPEAKERS[c["role"]]
            raw = c["content"]
            cleaned = clean_markers(raw) if role == "assistant" else raw
            fp = fingerprint(raw, c["ts"])
            if rec.key in ex.fragment_keys:
                report.add(fam, "existing")
                fingerprints.setdefault(fp, None)
                continue
            frag = _new_fragment(
                key=rec.key,
                role=c["role"],
                content=raw,
                ts=c["ts"],
                day_key=c["day_key"] or "",
                hour=c["hour"],
                period=c["period"] or "",
                fingerprint=fp,
                legacy_extra=rec.extra,
            )
            if ("mem", rec.rid) in ex.tombs or ("mem", rec.key) in ex.tombs:
                report.add(fam, "tombstoned")
                continue
            # Rule 2: a retried write under another random key.
            if fp in fingerprints:
                frag.disposition = LegacyFragment.Disposition.DUPLICATE
                p.fragments.append((frag, fingerprints[fp]))
                report.add(fam, "duplicate")
                continue
            # Rule 1: merge with the msg: twin (same speaker, cleaned content, ts within seconds).
            twin = _nearest(index.get((role, loose(cleaned)), ()), c["ts"])
            if twin is not None:
                twin[4] += 1
                _ts, mrec, tombstoned, mid, _n = twin
                if tombstoned:
                    _suppress(p, frag, fp, fingerprints, report, fam)
                    continue
                frag.disposition = LegacyFragment.Disposition.MERGED
                p.fragments.append((frag, mid))
                fingerprints[fp] = mid
                report.add(fam, "merged")
                msg = planned.get(mid)
                if msg is not None:
                    _apply_local_clock(msg, c)
                    if role == "assistant" and raw != msg.content:
                        msg.raw_content = raw
                    if msg.deleted_at is not None:
                        report.add(fam, "soft_deleted")
                continue
            # Rule 4 (P0-2): a fragment left behind by a hard delete.
            chash = content_hash(pkey, cleaned)
            if any(abs(c["ts"] - t) <= MATCH_WINDOW_MS for t in ex.msg_tombs.get(chash, ())):
                _suppress(p, frag, fp, fingerprints, report, fam)
                continue
            mid = fragment_mid(rec.key, c["role"], c["ts"])
            if ("msg", mid) in ex.tombs:
                _suppress(p, frag, fp, fingerprints, report, fam)
                continue
            frag.disposition = LegacyFragment.Disposition.OWN
            p.fragments.append((frag, mid))
            fingerprints[fp] = mid
            if mid in ex.mids or mid in planned:
                report.add(fam, "existing")
                continue
            created = datetime.fromtimestamp(c["ts"] / 1000, tz=UTC)
            msg = _new_message(
                mid=mid,
                speaker=role,
                message_type=Message.Type.TEXT,
                content=cleaned,
                raw_content=raw if raw != cleaned else "",
                created_at=created,
                legacy_key=rec.key,
                content_hash=chash,
                legacy_extra={"origin": "fragment"},
            )
            _apply_local_clock(msg, c)
            planned[mid] = msg
            contents[(pkey, mid)] = cleaned
            p.messages.append(msg)
            report.add(fam, "created")

        kept_aside = sum(1 for m in p.messages if m.legacy_key.startswith(LEGACY_V0_PREFIX))
        if kept_aside and not legacy_readable():
            report.note(f"profile {pkey}: MEM_READ_LEGACY=0 — {kept_aside} line(s) from mem_ records kept aside:"
                        " stored, but neither recalled nor shown until MEM_READ_LEGACY=1 (SPEC P3)")
        unmatched = sum(
            1 for entries in index.values() for e in entries if e[4] == 0 and not e[2] and e[3] in planned
        )
        if unmatched and frags_by_profile.get(pkey):
            report.note(f"profile {pkey}: {unmatched} msg: records had no mem: fragment (normal after v2)")


def _nearest(entries, ts: int):
    """The msg: twin closest in time within the window, preferring one not yet claimed.

    `entries` is sorted by time (see _plan_messages), so only the window is scanned.
    """
    if not entries:
        return None
    i = bisect_left(entries, ts - MATCH_WINDOW_MS, key=lambda e: e[0])
    best = None
    while i < len(entries) and entries[i][0] <= ts + MATCH_WINDOW_MS:
        e = entries[i]
        rank = (e[4] > 0, abs(e[0] - ts))
        if best is None or rank < best[0]:
            best = (rank, e)
        i += 1
    return best[1] if best else None


def _apply_local_clock(msg: Message, c: dict) -> None:
    """The fragment's local day key / hour / period (R7) onto its message."""
    if c["day_key"]:
        msg.local_day_key = c["day_key"]
    if c["hour"] is not None:
        msg.local_hour = c["hour"]
    if c["period"]:
        msg.period = c["period"]


def _plan_highlights(by_family, plan_for, report: Report, contents: dict) -> None:
    """Rule 6: a highlight whose text is not verbatim in its message is imported flagged."""
    wanted: dict[str, set] = defaultdict(set)
    for rec in by_family.get("hl", ()):
        if (rec.profile, rec.cols["mid"]) not in contents:
            wanted[rec.profile].add(rec.cols["mid"])
    for pkey, mids in wanted.items():
        profile = plan_for(pkey).existing.profile
        if profile is not None:
            for mid, content in Message.objects.filter(profile=profile, mid__in=mids).values_list("mid", "content"):
                contents[(pkey, mid)] = content
    seen: set = set()
    for rec in by_family.get("hl", ()):
        p = plan_for(rec.profile)
        c = rec.cols
        if ("hl", rec.rid) in p.existing.tombs:
            report.add("hl", "tombstoned")
            continue
        if rec.rid in p.existing.hids or (rec.profile, rec.rid) in seen:
            report.add("hl", "existing")
            continue
        seen.add((rec.profile, rec.rid))
        mid = c["mid"]
        content = contents.get((rec.profile, mid))
        flagged = ""
        if content is None:
            flagged = f"message {mid} is missing" + (" (hard-deleted)" if ("msg", mid) in p.existing.tombs else "")
        elif c["content"] not in content:
            flagged = f"text not found verbatim in message {mid}"
        hl = Highlight(
            hid=rec.rid,
            mid=mid,
            content=c["content"],
            source=Highlight.Source.IMPORT,
            created_at=c["created_at"],
            deleted_at=c["deleted_at"],
            flagged=flagged,
            legacy_key=rec.key,
            legacy_extra=rec.extra,
        )
        p.highlights.append((hl, mid if content is not None else None))
        p.existing.hids[rec.rid] = None
        _count_created(report, "hl", rec.key, deleted=hl.deleted_at, flagged=flagged)


def _count_created(report: Report, fam: str, key: str, *, deleted, flagged: str) -> None:
    """A planned record in the final table: created, and soft-deleted or flagged when it is."""
    report.add(fam, "created")
    if deleted:
        report.add(fam, "soft_deleted")
    if flagged:
        report.add(fam, "flagged")
        report.note(f"flagged {key}: {flagged}")


def _plan_experiences(by_family, plan_for, report: Report) -> None:
    """Rule 6: an experience whose source messages are missing is imported flagged."""
    known_by_profile: dict[str, set] = {}
    for rec in by_family.get("exp", ()):
        p = plan_for(rec.profile)
        c = rec.cols
        if rec.profile not in known_by_profile:
            known_by_profile[rec.profile] = set(p.existing.mids) | {m.mid for m in p.messages}
        known = known_by_profile[rec.profile]
        if ("exp", rec.rid) in p.existing.tombs:
            report.add("exp", "tombstoned")
            continue
        if rec.rid in p.existing.eids:
            report.add("exp", "existing")
            continue
        mids = list(dict.fromkeys(c["source_mids"]))
        missing = [m for m in mids if m not in known]
        flagged = f"source messages missing: {', '.join(missing)}"[:200] if missing else ""
        exp = Experience(
            eid=rec.rid,
            title=c["title"],
            content=c["content"],
            status=c["status"],
            time_certainty=c["time_certainty"],
            event_time=c["event_time"],
            event_time_text=c["event_time_text"] or "",
            recorded_at=c["recorded_at"],
            deleted_at=c["deleted_at"],
            flagged=flagged,
            legacy_key=rec.key,
            legacy_extra=rec.extra,
        )
        p.experiences.append((exp, mids))
        p.existing.eids[rec.rid] = None
        _count_created(report, "exp", rec.key, deleted=exp.deleted_at, flagged=flagged)


def _plan_relations(by_family, plan_for, report: Report, contents: dict) -> None:
    """Rule 6: a relation whose end is missing is imported flagged."""
    for rec in by_family.get("rel", ()):
        p = plan_for(rec.profile)
        c = rec.cols
        if ("rel", rec.rid) in p.existing.tombs:
            report.add("rel", "tombstoned")
            continue
        if rec.rid in p.existing.rids:
            report.add("rel", "existing")
            continue
        p.existing.rids.add(rec.rid)
        missing = [e for e in (c["from_id"], c["to_id"]) if e not in p.existing.hids and e not in p.existing.eids]
        flagged = f"missing end: {', '.join(missing)}" if missing else ""
        rel = Relation(
            rid=rec.rid,
            type=c["type"],
            from_id=c["from_id"],
            to_id=c["to_id"],
            created_at=c["created_at"],
            deleted_at=c["deleted_at"],
            flagged=flagged,
            legacy_key=rec.key,
            legacy_extra=rec.extra,
        )
        p.relations.append(rel)
        _count_created(report, "rel", rec.key, deleted=rel.deleted_at, flagged=flagged)


# --------------------------------------------------------------------------- write


def _suppress(p, frag: LegacyFragment, fp: str, fingerprints: dict, report, fam: str) -> None:
    """A fragment of a tombstoned line: its words are blanked so deleted stays deleted; the key
    and fingerprint remain, so a re-import recognises it (LEGACY_KV rule 4)."""
    frag.disposition = LegacyFragment.Disposition.SUPPRESSED
    frag.content = ""
    p.fragments.append((frag, None))
    fingerprints[fp] = None
    report.add(fam, "tombstoned")


def _index_imported(messages: list[Message]) -> None:
    """Hand the new messages to the recall index, inside the import's transaction (D3); a bulk
    load leaves many small full-text segments, merged once at the end."""
    if messages:
        index_messages(messages, new=True)
        optimize_index()


def _offset_zone(hours: int):
    if hours == 0:
        return UTC, "UTC"
    sign = "+" if hours > 0 else "-"
    return timezone(timedelta(hours=hours)), f"UTC{sign}{abs(hours):02d}:00"


def assign_slices(*, profile: Profile, messages: list[Message], tz_offset_hours: int = 0) -> None:
    """Group new messages into slices by the idle gap (S1), reusing the profile's existing slices."""
    if not messages:
        return
    gap = timedelta(minutes=settings.PREVIOUSLY_SLICE_GAP_MINUTES)
    zone, tz_name = _offset_zone(tz_offset_hours)
    existing = list(Slice.objects.filter(profile=profile).order_by("started_at"))
    starts = [s.started_at for s in existing]
    taken = {s.key for s in existing}
    touched: dict[int, Slice] = {}
    new_slices: list[Slice] = []
    current: Slice | None = None
    members: list[tuple[Message, Slice]] = []
    for msg in sorted(messages, key=lambda m: (m.created_at, m.mid)):
        t = msg.created_at
        host = _existing_host(existing, starts, t, gap)
        if host is not None:
            if t < host.started_at:
                host.started_at = t
            if t > host.last_message_at:
                host.last_message_at = t
                if host.ended_at is not None and host.ended_at < t:
                    host.ended_at = t
            touched[host.pk] = host
            members.append((msg, host))
            continue
        if current is None or t - current.last_message_at > gap:
            start = t.astimezone(zone).replace(second=0, microsecond=0)
            key = start.strftime("%Y-%m-%d-%H%M")
            while key in taken:
                start += timedelta(minutes=1)
                key = start.strftime("%Y-%m-%d-%H%M")
            taken.add(key)
            current = Slice(
                profile=profile,
                key=key,
                started_at=t,
                last_message_at=t,
                ended_at=t,
                close_reason=Slice.CloseReason.IMPORT,
                tz=tz_name,
            )
            new_slices.append(current)
        current.last_message_at = current.ended_at = t
        members.append((msg, current))
    Slice.objects.bulk_create(new_slices, batch_size=BATCH)
    if touched:
        Slice.objects.bulk_update(list(touched.values()), ["started_at", "last_message_at", "ended_at"])
    for msg, slice_ in members:
        msg.slice = slice_
        if not msg.local_day_key or msg.local_hour is None:
            local = msg.created_at.astimezone(zone)
            msg.local_day_key = msg.local_day_key or local.strftime("%Y-%m-%d")
            msg.local_hour = local.hour if msg.local_hour is None else msg.local_hour
            msg.period = msg.period or period_of(local.hour)
        msg.tz = msg.tz or tz_name


def _existing_host(existing: list[Slice], starts: list, t: datetime, gap: timedelta) -> Slice | None:
    """An existing slice whose span, widened by the gap, contains t."""
    i = bisect_left(starts, t + gap)
    for s in existing[max(0, i - 2) : i][::-1]:
        if s.started_at - gap <= t <= s.last_message_at + gap:
            return s
    return None


def write_plan(profiles: dict[str, ProfilePlan], *, user, progress: Progress = _no_progress) -> None:
    """Write every planned row; call inside one transaction."""
    total = len(profiles)
    for i, (pkey, p) in enumerate(sorted(profiles.items()), 1):
        if pkey == "\0global":
            LegacyMeta.objects.bulk_create(p.meta, batch_size=BATCH)
            continue
        if not (p.tombs or p.messages or p.fragments or p.highlights or p.experiences or p.relations or p.meta):
            continue
        profile = p.existing.profile
        if profile is None:
            profile = Profile.objects.create(user=user, key=pkey)
        for obj in p.tombs:
            obj.profile = profile
        Tombstone.objects.bulk_create(p.tombs, batch_size=BATCH)

        assign_slices(profile=profile, messages=p.messages, tz_offset_hours=p.tz_offset_hours)
        for msg in p.messages:
            msg.profile = profile
        if p.messages and bulk_insert(Message, p.messages):
            # The raw insert returns no pks: read them back by the (profile, mid) unique key.
            mids = dict(Message.objects.filter(profile=profile).values_list("mid", "pk"))
            for msg in p.messages:
                msg.pk = mids[msg.mid]
        else:
            mids = dict(p.existing.mids)
            mids.update((m.mid, m.pk) for m in p.messages)
        _index_imported(p.messages)

        for frag, mid in p.fragments:
            frag.profile = profile
            frag.message_id = mids.get(mid) if mid else None
        bulk_insert(LegacyFragment, [f for f, _ in p.fragments])

        for hl, mid in p.highlights:
            hl.profile = profile
            hl.message_id = mids.get(mid) if mid else None
            if hl.message_id is None and not hl.flagged:
                hl.flagged = f"message {hl.mid} is missing"
        Highlight.objects.bulk_create([h for h, _ in p.highlights], batch_size=BATCH)
        hids = {k: v for k, v in p.existing.hids.items() if v is not None}
        hids.update((h.hid, h.pk) for h, _ in p.highlights)

        for exp, _ in p.experiences:
            exp.profile = profile
        Experience.objects.bulk_create([e for e, _ in p.experiences], batch_size=BATCH)
        sources, history = [], []
        for exp, src_mids in p.experiences:
            for pos, mid in enumerate(src_mids):
                sources.append(ExperienceSource(experience=exp, mid=mid, message_id=mids.get(mid), position=pos))
            history.append(
                ExperienceHistory(
                    experience=exp,
                    actor=ExperienceHistory.Actor.IMPORT,
                    action="import",
                    after={"title": exp.title, "content": exp.content, "status": exp.status, "source_mids": src_mids},
                    reason=f"imported from legacy key {exp.legacy_key}",
                )
            )
        ExperienceSource.objects.bulk_create(sources, batch_size=BATCH)
        ExperienceHistory.objects.bulk_create(history, batch_size=BATCH)
        eids = {k: v for k, v in p.existing.eids.items() if v is not None}
        eids.update((e.eid, e.pk) for e, _ in p.experiences)

        for rel in p.relations:
            rel.profile = profile
            rel.from_highlight_id = hids.get(rel.from_id)
            rel.from_experience_id = None if rel.from_highlight_id else eids.get(rel.from_id)
            rel.to_highlight_id = hids.get(rel.to_id)
            rel.to_experience_id = None if rel.to_highlight_id else eids.get(rel.to_id)
            if not rel.flagged and not (
                (rel.from_highlight_id or rel.from_experience_id) and (rel.to_highlight_id or rel.to_experience_id)
            ):
                rel.flagged = "missing end"
        Relation.objects.bulk_create(p.relations, batch_size=BATCH)

        for meta in p.meta:
            meta.profile = profile
        LegacyMeta.objects.bulk_create(p.meta, batch_size=BATCH)
        progress("writing", i, total)


def default_user(username: str | None):
    """The --user account, or the first superuser; LookupError with an actionable message."""
    User = get_user_model()
    if username:
        try:
            return User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise LookupError(f"no user {username!r}; create it first or pass another --user") from None
    user = User.objects.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        raise LookupError("no superuser to own the imported profiles; pass --user USERNAME or create one")
    return user


def import_kv(
    *,
    fh: IO[str],
    user,
    dry_run: bool = False,
    skip_bad: bool = False,
    progress: Progress = _no_progress,
) -> Report:
    """Import a legacy KV dump for `user`; all or nothing (X3, X4). Raises BadDump."""
    global _GLOBAL_META
    _GLOBAL_META = None
    report = Report(dry_run=dry_run)
    with _gc_paused():
        by_family = read_records(fh, skip_bad=skip_bad, report=report, progress=progress)
        with transaction.atomic():
            profiles = plan_import(by_family, user=user, report=report, progress=progress)
            del by_family
            if not dry_run:
                write_plan(profiles, user=user, progress=progress)
    _GLOBAL_META = None
    return report


@contextmanager
def _gc_paused():
    """No cyclic garbage collection while the import holds its records.

    The import keeps a few hundred thousand small containers alive at once, so every
    full collection walks all of them again and again for nothing (they are all live);
    reference counting still frees everything as usual. Restored on the way out.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["BadDump", "Report", "default_user", "fragment_mid", "import_kv", "str_hash"]
