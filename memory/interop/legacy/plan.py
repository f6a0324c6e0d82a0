"""Phase 2, plan: decide what to create against what the database already holds (rules 1-7).

Tombstones first, then messages (msg: merged with their mem: fragments), highlights,
experiences, relations and meta keys. What exists is prefetched per profile as ids, so a
re-import plans nothing and writes nothing. Counts and notes go to the report.
"""

import hashlib
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.utils.translation import gettext, gettext_noop

from memory.hashing import content_hash
from memory.interop import legacy_shapes as shapes
from memory.interop.legacy.kinds import FRAGMENT_KINDS, SPEAKERS, Record
from memory.interop.legacy.report import Progress, Report, no_progress
from memory.interop.legacy.rows import FragmentRow, MessageRow, Twin
from memory.markers import clean_reply, loose
from memory.models import (
    Experience,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    Message,
    Profile,
    Relation,
    Tombstone,
)
from memory.models.archive import LEGACY_V0_PREFIX, legacy_readable
from memory.models.deletion import tombstone_expiry
from memory.phrases import say

# "Timestamps within a few seconds" (rules 1 and 4).
MATCH_WINDOW_MS = 5_000


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
    hids: dict = field(default_factory=dict)  # hid -> pk (None: planned)
    eids: dict = field(default_factory=dict)  # eid -> pk (None: planned)
    rids: set = field(default_factory=set)
    tombs: set = field(default_factory=set)  # (kind, object_id)
    msg_tombs: dict = field(default_factory=lambda: defaultdict(list))  # content_hash -> [created ms]
    meta_keys: set = field(default_factory=set)

    @classmethod
    def load(cls, profile: Profile | None) -> "Existing":
        ex = cls(profile)
        if profile is None:
            return ex
        # Unordered: the models' default orderings would read (and sort) whole tables instead of
        # their (profile, id) unique indexes (BENCH §3: +64 MB of database pages on a re-import).
        ex.mids = dict(Message.objects.filter(profile=profile).order_by().values_list("mid", "pk"))
        ex.fragment_keys = set(
            LegacyFragment.objects.filter(profile=profile).order_by().values_list("key", flat=True)
        )
        ex.hids = dict(Highlight.objects.filter(profile=profile).order_by().values_list("hid", "pk"))
        ex.eids = dict(Experience.objects.filter(profile=profile).order_by().values_list("eid", "pk"))
        ex.rids = set(Relation.objects.filter(profile=profile).order_by().values_list("rid", flat=True))
        for kind, oid, chash, created in Tombstone.objects.filter(profile=profile).order_by().values_list(
            "kind", "object_id", "content_hash", "created_at"
        ):
            ex.tombs.add((kind, oid))
            if kind == Tombstone.Kind.MESSAGE and chash and created:
                ex.msg_tombs[chash].append(ms(created))
        ex.meta_keys = set(LegacyMeta.objects.filter(profile=profile).order_by().values_list("key", flat=True))
        return ex


@dataclass
class ProfilePlan:
    """What to create for one profile."""

    key: str
    existing: Existing
    tombs: list[Tombstone] = field(default_factory=list)
    messages: list[MessageRow] = field(default_factory=list)
    fragments: list[FragmentRow] = field(default_factory=list)
    highlights: list[Highlight] = field(default_factory=list)  # `.mid` names the message
    experiences: list[tuple[Experience, list[str]]] = field(default_factory=list)  # with source mids
    relations: list[Relation] = field(default_factory=list)
    meta: list[LegacyMeta] = field(default_factory=list)
    tz_offset_hours: int = 0

    def is_empty(self) -> bool:
        return not (self.tombs or self.messages or self.fragments or self.highlights or self.experiences
                    or self.relations or self.meta)


@dataclass
class Plan:
    """The whole import's plan: per profile, and the meta keys of no profile."""

    user: Any
    profiles: dict[str, ProfilePlan] = field(default_factory=dict)
    global_meta: list[LegacyMeta] = field(default_factory=list)
    _owned: dict | None = None
    _global_meta_keys: set | None = None

    def profile(self, key: str) -> ProfilePlan:
        p = self.profiles.get(key)
        if p is None:
            if self._owned is None:
                self._owned = {x.key: x for x in Profile.objects.filter(user=self.user)} if self.user else {}
            p = self.profiles[key] = ProfilePlan(key, Existing.load(self._owned.get(key)))
        return p

    def global_meta_keys(self) -> set:
        if self._global_meta_keys is None:
            self._global_meta_keys = set(
                LegacyMeta.objects.filter(profile__isnull=True).order_by().values_list("key", flat=True)
            )
        return self._global_meta_keys


def plan_import(
    by_kind: dict[str, list[Record]], *, user, report: Report, progress: Progress = no_progress
) -> Plan:
    """Decide, per profile, what to create; counts go to the report. Writes nothing.

    Consumes `by_kind`: the message and fragment records are let go as they are planned, so
    the records and the rows made from them are not all held at once (BENCH §3 memory)."""
    plan = Plan(user)
    for records in by_kind.values():
        for rec in records:
            if rec.profile:
                plan.profile(rec.profile)
    for rec in by_kind.get("tomb", ()):
        _plan_tombstone(plan.profile(rec.profile), rec, report)
    progress("planning", 1, 5)
    contents: dict[tuple[str, str], str] = {}  # (profile, mid) -> content, for highlight checks
    _plan_messages(by_kind, plan, report, contents)
    progress("planning", 2, 5)
    _plan_highlights(by_kind.get("hl", ()), plan, report, contents)
    _plan_experiences(by_kind.get("exp", ()), plan, report)
    _plan_relations(by_kind.get("rel", ()), plan, report)
    progress("planning", 4, 5)
    for rec in by_kind.get("meta", ()):
        _plan_meta(plan, rec, report)
    progress("planning", 5, 5)
    return plan


def _plan_tombstone(p: ProfilePlan, rec: Record, report: Report) -> None:
    """Rule 4: tombstones first -- the dump's and the database's both block."""
    ident = (rec.tkind, rec.rid)
    if ident in p.existing.tombs:
        report.add("tomb", "existing")
        return
    p.existing.tombs.add(ident)
    c = rec.cols
    if rec.tkind == "msg" and c.content_hash and c.created_at:
        p.existing.msg_tombs[c.content_hash].append(ms(c.created_at))
    expires = tombstone_expiry(c.deleted_at)
    kv_seconds = shapes.parse_expiration((rec.extra.get(shapes.KV) or {}).get("expiration"))
    if kv_seconds is not None:
        at = datetime.fromtimestamp(kv_seconds, tz=UTC)
        if at > c.deleted_at:
            expires = at
    p.tombs.append(
        Tombstone(
            kind=rec.tkind,
            object_id=rec.rid,
            deleted_at=c.deleted_at,
            expires_at=expires,
            content_hash=c.content_hash or "",
            created_at=c.created_at,
            legacy_key=rec.key,
            legacy_extra=rec.extra,
        )
    )
    report.add("tomb", "created")


def _plan_meta(plan: Plan, rec: Record, report: Report) -> None:
    """Any meta_ key is kept verbatim in a key-value table and reported."""
    p = plan.profiles.get(rec.profile) if rec.profile else None
    keys = p.existing.meta_keys if p else plan.global_meta_keys()
    if rec.key in keys:
        report.add("meta", "existing")
        return
    keys.add(rec.key)
    kv = rec.extra.get(shapes.KV) or {}
    exp = kv.get("expiration")
    meta = LegacyMeta(
        key=rec.key,
        value=rec.cols.value,
        expiration=shapes.parse_expiration(exp) if exp is not None else None,
        metadata=_meta_metadata(kv),
    )
    (p.meta if p is not None else plan.global_meta).append(meta)
    report.add("meta", "created")
    if not rec.key.startswith("meta_lastTs:"):
        report.note(gettext("meta key kept verbatim: %(key)s") % {"key": rec.key})


def _meta_metadata(kv: dict) -> Any:
    """LegacyMeta.metadata holds the KV metadata; other KV attributes ride along under _kv."""
    rest = {k: v for k, v in kv.items() if k not in ("expiration", "metadata")}
    if "expiration" in kv and not isinstance(kv["expiration"], int):
        rest["expiration"] = kv["expiration"]  # an ISO spelling, kept as written
    if not rest:
        return kv.get("metadata")
    return {"metadata": kv.get("metadata"), shapes.KV: rest}


def infer_offset(frags: Iterable[Record]) -> int:
    """The profile's usual UTC offset in hours, from the fragments' local day_key + hour."""
    votes: Counter = Counter()
    for i, rec in enumerate(frags):
        if i > 2000:
            break
        c = rec.cols
        if c.hour is None or not c.day_key:
            continue
        try:
            local = datetime.strptime(c.day_key, "%Y-%m-%d").replace(hour=c.hour, tzinfo=UTC)
        except ValueError:
            continue
        utc = datetime.fromtimestamp(c.ts / 1000, tz=UTC).replace(minute=0, second=0, microsecond=0)
        off = round((local - utc).total_seconds() / 3600)
        if -12 <= off <= 14:
            votes[off] += 1
    return votes.most_common(1)[0][0] if votes else 0


# ---------------------------------------------------------------- messages (rules 1-4)


def _plan_messages(by_kind: dict[str, list[Record]], plan: Plan, report: Report, contents: dict) -> None:
    """Rules 1-4: msg: records, their mem: twins, orphan fragments, duplicates, tombstones."""
    frags: dict[str, list[Record]] = defaultdict(list)
    for kind in FRAGMENT_KINDS:
        for rec in by_kind.pop(kind, ()):
            frags[rec.profile].append(rec)
    msgs: dict[str, list[Record]] = defaultdict(list)
    for rec in by_kind.pop("msg", ()):
        msgs[rec.profile].append(rec)
    for pkey in sorted(set(frags) | set(msgs)):
        p = plan.profile(pkey)
        ordered = frags.pop(pkey, [])
        p.tz_offset_hours = infer_offset(ordered)
        lines = _Lines(p, report, contents)
        for rec in msgs.pop(pkey, ()):
            lines.add_msg(rec)
        ordered.sort(key=lambda r: (r.cols.ts, r.key))
        ordered.reverse()  # popped from the end, oldest first: each record is let go once planned
        has_fragments = bool(ordered)
        while ordered:
            lines.add_fragment(ordered.pop())
        lines.note_unmatched(has_fragments=has_fragments)
        lines.note_kept_aside()
        del lines  # the profile's msg: records


class _Lines:
    """One profile's lines: msg: records first, then each mem: fragment merged, kept or suppressed."""

    def __init__(self, p: ProfilePlan, report: Report, contents: dict):
        self.p, self.ex, self.report, self.contents = p, p.existing, report, contents
        self.msgs: list[Record] = []
        self._twins: dict[tuple[str, str], list[Twin]] | None = None
        self.planned: dict[str, MessageRow] = {}
        self.seen_mids: set[str] = set()
        self.fingerprints: dict[str, str | None] = {}  # fingerprint -> mid of the first fragment

    @property
    def twins(self) -> dict[tuple[str, str], list[Twin]]:
        """For merging: (speaker, loose content) -> the msg: records of those words, by time.

        Built on first use: a re-import, whose fragments all exist, never needs it."""
        if self._twins is None:
            self._twins = defaultdict(list)
            for rec in self.msgs:
                c = rec.cols
                twin = Twin(ms(c.created_at), rec.rid, ("msg", rec.rid) in self.ex.tombs)
                key = loose(c.content)
                self._twins[(c.speaker, c.content if key == c.content else key)].append(twin)  # one copy
            self.msgs = []  # the twins are all that merging needs of them
            for twins in self._twins.values():
                twins.sort(key=lambda t: t.at_ms)
        return self._twins

    def add_msg(self, rec: Record) -> None:
        c, mid, report = rec.cols, rec.rid, self.report
        tombstoned = ("msg", mid) in self.ex.tombs
        self.msgs.append(rec)
        if mid in self.seen_mids:
            report.add("msg", "duplicate")
            report.note(gettext("duplicate key for message %(mid)s: %(key)s") % {"mid": mid, "key": rec.key})
            return
        self.seen_mids.add(mid)
        if tombstoned:
            report.add("msg", "tombstoned")
            return
        if mid in self.ex.mids:
            report.add("msg", "existing")
            return
        row = MessageRow(
            mid=mid,
            speaker=c.speaker,
            message_type=c.message_type,
            content=c.content,
            created_at=c.created_at,
            source_id=c.source_id or "",
            sync_status=c.sync_status or "",
            deleted_at=c.deleted_at,
            attachment=c.attachment,
            legacy_key=rec.key,
            content_hash=c.content_hash or content_hash(self.p.key, c.content),
            legacy_extra=rec.extra,
        )
        self._plan(row)
        report.add("msg", "created")
        if row.deleted_at is not None:
            report.add("msg", "soft_deleted")

    def _plan(self, row: MessageRow) -> None:
        self.planned[row.mid] = row
        self.contents[(self.p.key, row.mid)] = row.content
        self.p.messages.append(row)

    def add_fragment(self, rec: Record) -> None:
        c = rec.cols
        family = rec.kind
        raw = c.content
        fp = fingerprint(raw, c.ts)
        if rec.key in self.ex.fragment_keys:
            self.report.add(family, "existing")
            self.fingerprints.setdefault(fp, None)
            return
        role = SPEAKERS[c.role]
        cleaned = clean_reply(raw) if role == "assistant" else raw
        if ("mem", rec.rid) in self.ex.tombs or ("mem", rec.key) in self.ex.tombs:
            self.report.add(family, "tombstoned")
            return
        frag = FragmentRow(
            key=rec.key,
            role=c.role,
            content=raw,
            ts=c.ts,
            day_key=c.day_key or "",
            hour=c.hour,
            period=c.period or "",
            fingerprint=fp,
            legacy_extra=rec.extra,
        )
        if fp in self.fingerprints:  # Rule 2: a retried write under another random key.
            frag.disposition, frag.mid = LegacyFragment.Disposition.DUPLICATE, self.fingerprints[fp]
            self.p.fragments.append(frag)
            self.report.add(family, "duplicate")
            return
        twin = nearest(self.twins.get((role, loose(cleaned)), ()), c.ts)
        if twin is not None:
            self._merge(frag, twin, family, role)
        else:
            self._own(frag, family, role, cleaned)

    def _merge(self, frag: FragmentRow, twin: Twin, family: str, role: str) -> None:
        """Rule 1: the fragment of a msg: record (same speaker, cleaned content, ts within seconds)."""
        twin.claims += 1
        if twin.tombstoned:
            self._suppress(frag, family)
            return
        frag.disposition, frag.mid = LegacyFragment.Disposition.MERGED, twin.mid
        self.p.fragments.append(frag)
        self.fingerprints[frag.fingerprint] = twin.mid
        self.report.add(family, "merged")
        row = self.planned.get(twin.mid)
        if row is not None:
            if frag.content == row.content:
                frag.content = row.content  # the double write's two copies of the words held once
            apply_local_clock(row, frag)
            if role == "assistant" and frag.content != row.content:
                row.raw_content = frag.content
            if row.deleted_at is not None:
                self.report.add(family, "soft_deleted")

    def _own(self, frag: FragmentRow, family: str, role: str, cleaned: str) -> None:
        """A fragment with no msg: twin: a message of its own, unless a hard delete left it (rule 4)."""
        chash = content_hash(self.p.key, cleaned)
        if any(abs(frag.ts - t) <= MATCH_WINDOW_MS for t in self.ex.msg_tombs.get(chash, ())):
            self._suppress(frag, family)
            return
        mid = fragment_mid(frag.key, frag.role, frag.ts)
        if ("msg", mid) in self.ex.tombs:
            self._suppress(frag, family)
            return
        frag.mid = mid
        self.p.fragments.append(frag)
        self.fingerprints[frag.fingerprint] = mid
        if mid in self.ex.mids or mid in self.planned:
            self.report.add(family, "existing")
            return
        row = MessageRow(
            mid=mid,
            speaker=role,
            content=cleaned,
            raw_content=frag.content if frag.content != cleaned else "",
            created_at=datetime.fromtimestamp(frag.ts / 1000, tz=UTC),
            legacy_key=frag.key,
            content_hash=chash,
            legacy_extra={"origin": "fragment"},
        )
        apply_local_clock(row, frag)
        self._plan(row)
        self.report.add(family, "created")

    def _suppress(self, frag: FragmentRow, family: str) -> None:
        """A fragment of a tombstoned line: its words are blanked so deleted stays deleted; the key
        and fingerprint remain, so a re-import recognises it (rule 4)."""
        frag.disposition, frag.content = LegacyFragment.Disposition.SUPPRESSED, ""
        self.p.fragments.append(frag)
        self.fingerprints[frag.fingerprint] = None
        self.report.add(family, "tombstoned")

    def note_kept_aside(self) -> None:
        """P3: with MEM_READ_LEGACY=0, say how many new lines from mem_ records are kept aside."""
        kept_aside = sum(1 for m in self.p.messages if m.legacy_key.startswith(LEGACY_V0_PREFIX))
        if kept_aside and not legacy_readable():
            self.report.note(gettext("profile %(key)s: MEM_READ_LEGACY=0 — %(n)s line(s) from mem_ records kept aside:"
                                     " stored, but neither recalled nor shown until MEM_READ_LEGACY=1 (SPEC P3)") % {
                "key": self.p.key, "n": kept_aside})

    def note_unmatched(self, *, has_fragments: bool) -> None:
        if not (self.planned and has_fragments):
            return  # only new messages are counted
        unmatched = sum(
            1
            for twins in self.twins.values()
            for t in twins
            if t.claims == 0 and not t.tombstoned and t.mid in self.planned
        )
        if unmatched:
            self.report.note(gettext("profile %(key)s: %(n)s msg: records had no mem: fragment (normal after v2)") % {
                "key": self.p.key, "n": unmatched})


def nearest(twins: list[Twin], ts: int) -> Twin | None:
    """The msg: twin closest in time within the window, preferring one not yet claimed.

    `twins` is sorted by time, so only the window is scanned.
    """
    if not twins:
        return None
    i = bisect_left(twins, ts - MATCH_WINDOW_MS, key=lambda t: t.at_ms)
    best, best_rank = None, None
    while i < len(twins) and twins[i].at_ms <= ts + MATCH_WINDOW_MS:
        t = twins[i]
        rank = (t.claims > 0, abs(t.at_ms - ts))
        if best_rank is None or rank < best_rank:
            best, best_rank = t, rank
        i += 1
    return best


def apply_local_clock(row: MessageRow, frag: FragmentRow) -> None:
    """The fragment's local day key / hour / period (R7) onto its message."""
    if frag.day_key:
        row.local_day_key = frag.day_key
    if frag.hour is not None:
        row.local_hour = frag.hour
    if frag.period:
        row.period = frag.period


# ---------------------------------------------------------------- curation (rule 6)


def _known_contents(records: list[Record], plan: Plan, contents: dict) -> None:
    """The contents of the messages highlights name that are already in the database."""
    wanted: dict[str, set] = defaultdict(set)
    for rec in records:
        if (rec.profile, rec.cols.mid) not in contents:
            wanted[rec.profile].add(rec.cols.mid)
    for pkey, mids in wanted.items():
        profile = plan.profile(pkey).existing.profile
        if profile is not None:
            for mid, content in Message.objects.filter(profile=profile, mid__in=mids).values_list("mid", "content"):
                contents[(pkey, mid)] = content


def _blocked(p: ProfilePlan, family: str, rid: str, known, report: Report) -> bool:
    """A tombstoned or already imported curation record: counted, not planned."""
    if (family, rid) in p.existing.tombs:
        report.add(family, "tombstoned")
        return True
    if rid in known:
        report.add(family, "existing")
        return True
    return False


def _plan_highlights(records: list[Record], plan: Plan, report: Report, contents: dict) -> None:
    """Rule 6: a highlight whose text is not verbatim in its message is imported flagged."""
    _known_contents(records, plan, contents)
    for rec in records:
        p = plan.profile(rec.profile)
        if _blocked(p, "hl", rec.rid, p.existing.hids, report):
            continue
        c = rec.cols
        mid = c.mid
        content = contents.get((rec.profile, mid))
        flagged = ""
        if content is None:
            flagged = say(gettext_noop("message %(mid)s is missing (hard-deleted)") if ("msg", mid) in p.existing.tombs
                          else gettext_noop("message %(mid)s is missing"), mid=mid)
        elif c.content not in content:
            flagged = say(gettext_noop("text not found verbatim in message %(mid)s"), mid=mid)
        hl = Highlight(
            hid=rec.rid,
            mid=mid,
            content=c.content,
            source=Highlight.Source.IMPORT,
            created_at=c.created_at,
            **_flaggable(rec, flagged),
        )
        p.highlights.append(hl)
        p.existing.hids[rec.rid] = None
        report.created("hl", rec.key, deleted=hl.deleted_at, flagged=flagged)


def _flaggable(rec: Record, flagged: str) -> dict:
    """The fields every flaggable legacy row (highlight, experience, relation) carries alike:
    its soft delete, the rule-6 flag, and where it came from."""
    return {"deleted_at": rec.cols.deleted_at, "flagged": str(flagged), "legacy_key": rec.key, "legacy_extra": rec.extra}


def _plan_experiences(records: list[Record], plan: Plan, report: Report) -> None:
    """Rule 6: an experience whose source messages are missing is imported flagged."""
    known_mids: dict[str, set] = {}
    for rec in records:
        p = plan.profile(rec.profile)
        if rec.profile not in known_mids:
            known_mids[rec.profile] = set(p.existing.mids) | {m.mid for m in p.messages}
        if _blocked(p, "exp", rec.rid, p.existing.eids, report):
            continue
        c = rec.cols
        mids = list(dict.fromkeys(c.source_mids))
        missing = [m for m in mids if m not in known_mids[rec.profile]]
        flagged = say(gettext_noop("source messages missing: %(mids)s"), mids=", ".join(missing)) if missing else ""
        if len(flagged) > 200:
            flagged = flagged[:200]  # the column's length: the cut English text (and the note says it so)
        exp = Experience(
            eid=rec.rid,
            title=c.title,
            content=c.content,
            status=c.status,
            time_certainty=c.time_certainty,
            event_time=c.event_time,
            event_time_text=c.event_time_text or "",
            recorded_at=c.recorded_at,
            **_flaggable(rec, flagged),
        )
        p.experiences.append((exp, mids))
        p.existing.eids[rec.rid] = None
        report.created("exp", rec.key, deleted=exp.deleted_at, flagged=flagged)


def _plan_relations(records: list[Record], plan: Plan, report: Report) -> None:
    """Rule 6: a relation whose end is missing is imported flagged."""
    for rec in records:
        p = plan.profile(rec.profile)
        if _blocked(p, "rel", rec.rid, p.existing.rids, report):
            continue
        p.existing.rids.add(rec.rid)
        c = rec.cols
        ex = p.existing
        missing = [e for e in (c.from_id, c.to_id) if e not in ex.hids and e not in ex.eids]
        flagged = say(gettext_noop("missing end: %(ids)s"), ids=", ".join(missing)) if missing else ""
        rel = Relation(
            rid=rec.rid,
            type=c.type,
            from_id=c.from_id,
            to_id=c.to_id,
            created_at=c.created_at,
            **_flaggable(rec, flagged),
        )
        p.relations.append(rel)
        report.created("rel", rec.key, deleted=rel.deleted_at, flagged=flagged)
