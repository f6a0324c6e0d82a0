"""The full import's writes (SPEC X2, S4): each profile's new rows, deduplicated by id against
what it holds and blocked by tombstones, in batches of PREVIOUSLY_IMPORT_BATCH_ROWS rows each in
its own short transaction. The same code, with nothing written, is the checking pass: every row
is asked whether the database would take it (`check.storable`)."""

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from itertools import islice

from django.db import connection, transaction

from memory.clock import PERIOD_IDS
from memory.interop.bulk_insert import insert_rows
from memory.interop.full.check import DAY_KEY_RE, storable
from memory.interop.full.report import BadExport, FullReport
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
    PROFILE_KEY_RE,
)
from memory.recall.index import index_messages, optimize_index

PERIOD_MAX = Message._meta.get_field("period").max_length
LOCK_POLL_SECONDS = 0.1  # SQLite's busy handler's longest sleep between two tries


def _dt(value):
    return datetime.fromisoformat(value) if value else None


def _local_clock(fields: dict) -> dict:
    """Period and day key as the file says them (issue 25 point 2: nothing derived; the prompt
    shows only a period from the closed set, S5); a value longer than its column (a legacy one)
    is kept in legacy_extra instead, and a day key not of the fixed shape too."""
    extra = dict(fields.get("legacy_extra") or {})
    period = fields.get("period") or ""
    if period and period not in PERIOD_IDS and len(period) > PERIOD_MAX:
        extra.setdefault("period", period)
        fields["period"] = ""
    day = fields.get("local_day_key") or ""
    if day and not DAY_KEY_RE.fullmatch(day):
        extra.setdefault("local_day_key", day)
        fields["local_day_key"] = ""
    if extra:
        fields["legacy_extra"] = extra
    return fields

@dataclass
class Writes:
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
    out: Writes
    tombs: set = field(default_factory=set)
    slices: dict = field(default_factory=dict)
    mids: "_Mids" = None
    hids: dict = field(default_factory=dict)
    eids: dict = field(default_factory=dict)

    def __post_init__(self):
        self.mids = _Mids(self.profile.pk, writing=self.out.write)

    def add(self, kind: str, column: str) -> None:
        self.report.add(kind, column)


class _Mids:
    """The profile's message ids as the import needs them, without a million of them held with
    their keys (issue 24 point 6): the keys of one chunk of mids at a time, looked up in the
    database (`load`), and the mids this import adds that the database does not hold yet (which
    also finds a line the file gives twice) — in the checking pass all of them, when writing only
    those of the chunk being written and the lines waiting for a slice (the others are written
    before the next chunk is looked up). A mid added has its key once written, None before."""

    def __init__(self, profile_id, *, writing: bool):
        self.profile_id = profile_id
        self.writing = writing
        self.added: set[str] = set()
        self.waiting: set[str] = set()  # lines without a slice, written at the end
        self.pks: dict[str, int] = {}

    def load(self, mids: Iterable) -> None:
        """The database's keys of these mids (those it holds), for the chunk being read."""
        if self.writing:
            self.added.clear()  # written: the database has them now
        wanted = {m for m in mids if isinstance(m, str)}
        self.pks = _message_keys(self.profile_id, wanted) if self.profile_id is not None and wanted else {}

    def __contains__(self, mid) -> bool:
        return mid in self.pks or mid in self.added or mid in self.waiting

    def get(self, mid):
        return self.pks.get(mid)

    def __getitem__(self, mid):
        return self.pks.get(mid)

def _message_keys(profile_id: int, mids) -> dict[str, int]:
    """mid -> key of these lines of the profile, by its unique (profile, mid) index: without the
    model's ordering, which made SQLite walk every line of the profile in created_at order for
    each chunk (issue 24 point 6: the apply's cost grew with the square of the lines)."""
    return dict(Message.objects.filter(profile_id=profile_id, mid__in=mids).order_by().values_list("mid", "pk"))


def _chunks(records: Iterable, size: int = 1000) -> Iterator[list]:
    """The records a chunk at a time (the mids of one chunk are looked up together)."""
    it = iter(records)
    while chunk := list(islice(it, size)):
        yield chunk


def start_profile(key: str, members: dict, *, user, report: FullReport, out: Writes) -> _Profile:
    """One profile of the export, made (or found) before its records. In the dry run nothing
    is saved: the profile may stay unsaved, so existing rows are looked up by `profile_id`
    (None: none)."""
    if not isinstance(key, str) or not PROFILE_KEY_RE.fullmatch(key):
        raise ValueError(f"profile key {key!r} is invalid")
    defaults = {"name": members.get("name", ""), "persona": members.get("persona", ""),
                "language": members.get("language", "zh"), "proactive_enabled": members.get("proactive_enabled", True)}
    out.profile = key
    if out.write:
        out.kind = "the profile"
        with transaction.atomic():
            profile, _ = Profile.objects.get_or_create(user=user, key=key, defaults=defaults)
    else:
        profile = Profile.objects.filter(user=user, key=key).first() or Profile(user=user, key=key, **defaults)
        if profile.pk is None:
            out.one("the profile", None, profile)
    return _Profile(profile=profile, key=key, report=report, out=out)


def _tombstones(p: _Profile, records: Iterable[dict]) -> None:
    """Tombstones first: the file's are imported, then block what they name."""
    p.tombs = set(Tombstone.objects.filter(profile_id=p.profile.pk).values_list("kind", "object_id"))
    new = []
    for t in records:
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


def _slices(p: _Profile, records: Iterable[dict]) -> None:
    p.slices = {s.key: s for s in Slice.objects.filter(profile_id=p.profile.pk)}
    new = []
    for s in records:
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


def _messages(p: _Profile, records: Iterable[dict]) -> None:
    """New lines in their slices (a line the file gives none joins one by the idle gap, S1),
    indexed for recall in the batch that writes them (D3). They stream: a chunk at a time is
    looked up, checked or written (issue 24 point 6: a million lines held as rows took ~1 kB
    each); only lines without a slice wait for the end, to be given one."""
    loose, written = [], False
    for chunk in _chunks(records, _chunk_rows(p.out)):
        p.mids.load(m["mid"] for m in chunk)
        new = []
        for m in chunk:
            p.add("messages", "read")
            if ("msg", m["mid"]) in p.tombs:
                p.add("messages", "tombstoned")
                p.report.notes.append(f"{p.key}: message {m['mid']} is tombstoned; skipped")
                continue
            if m["mid"] in p.mids:
                p.add("messages", "existing")
                continue
            obj = _message(p.profile, m)
            p.mids.added.add(obj.mid)
            p.add("messages", "created")
            if not p.out.write:
                # The checking pass asks each row now and keeps none.
                p.out.batched("messages", [obj], _write_messages)
                continue
            slice_ = p.slices.get(m.get("slice"))
            if slice_ is None:
                loose.append(obj)
                p.mids.waiting.add(obj.mid)
            else:
                obj.slice = slice_
                new.append(obj)
        p.out.batched("messages", new, _write_messages)
        written = written or bool(new)
    if loose:
        # Their slices go in first, in one transaction (far fewer rows than lines); with none,
        # nothing is asked (it read the profile's slices: 3.8 s of a 20k-line apply).
        p.out.one("message slices", lambda: assign_slices(profile=p.profile, messages=loose))
        p.out.batched("messages", loose, _write_messages)
    if p.out.write and (written or loose):
        p.out.one("the recall index", optimize_index)


def _message(profile: Profile, m: dict) -> Message:
    """The row of a line of the file, made from its column values in order (Django's fast way,
    as a row read from the database is made: keyword arguments cost ~100 µs a row, issue 24
    point 6); every column the file does not give takes its default."""
    values = list(_message_defaults())
    values[_MESSAGE_AT["legacy_extra"]] = {}  # a default of its own (a dict is changed in place)
    fields = _local_clock({f: m[f] for f in MESSAGE_COLUMNS if f in m})
    fields.update(profile_id=profile.pk, created_at=_dt(m["created_at"]), deleted_at=_dt(m.get("deleted_at")))
    for name, value in fields.items():
        values[_MESSAGE_AT[name]] = value
    obj = Message(*values)
    Message.profile.field.set_cached_value(obj, profile)
    return obj


_MESSAGE_AT = {f.attname: i for i, f in enumerate(Message._meta.concrete_fields)}


@cache
def _message_defaults() -> tuple:
    return tuple(None if f.primary_key else f.get_default() for f in Message._meta.concrete_fields)


def _chunk_rows(out: Writes) -> int:
    """Records read together (their mids looked up in one query): whole batches when writing."""
    return out.rows * max(1, 1000 // out.rows) if out.write else 1000


def _write_messages(batch: list) -> None:
    """The batch by plain `executemany` (issue 24 point 6: `bulk_create`'s query compiler was a
    third of an apply), its keys read back by mid, then indexed for recall."""
    insert_rows(Message, batch)
    keys = _message_keys(batch[0].profile_id, [m.mid for m in batch])
    for m in batch:
        m.pk = keys[m.mid]
        m._state.adding = False
    index_messages(batch, new=True)


def _legacy_fragments(p: _Profile, records: Iterable[dict]) -> None:
    rows = LegacyFragment.objects.filter(profile_id=p.profile.pk)
    keys = set(rows.values_list("key", flat=True))
    prints = set(rows.values_list("fingerprint", flat=True))
    for chunk in _chunks(records, _chunk_rows(p.out)):
        p.mids.load(f.get("mid") for f in chunk)
        _legacy_fragment_chunk(p, chunk, keys, prints)


def _legacy_fragment_chunk(p: _Profile, chunk: list, keys: set, prints: set) -> None:
    new = []
    for f in chunk:
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


def _highlights(p: _Profile, records: Iterable[dict]) -> None:
    p.hids = dict(Highlight.objects.filter(profile_id=p.profile.pk).values_list("hid", "pk"))
    for chunk in _chunks(records, _chunk_rows(p.out)):
        p.mids.load(h["mid"] for h in chunk)
        _highlight_chunk(p, chunk)


def _highlight_chunk(p: _Profile, chunk: list) -> None:
    new = []
    for h in chunk:
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


def _experiences(p: _Profile, records: Iterable[dict]) -> None:
    """Experiences with their sources and history, written together (a batch is whole)."""
    p.eids = dict(Experience.objects.filter(profile_id=p.profile.pk).values_list("eid", "pk"))
    for chunk in _chunks(records, _chunk_rows(p.out)):
        p.mids.load(mid for e in chunk for mid in e.get("source_mids", []))
        _experience_chunk(p, chunk)


def _experience_chunk(p: _Profile, chunk: list) -> None:
    new = []
    for e in chunk:
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
        history = [_dated(ExperienceHistory(experience=obj, actor=h["actor"], action=h["action"],
                                            before=h.get("before"), after=h.get("after"), reason=h.get("reason") or ""),
                          h) for h in e.get("history", [])]
        new.append((obj, sources, history))
        p.eids[e["eid"]] = None
        p.add("experiences", "created")
    p.out.batched("experiences", new, _write_experiences)
    p.eids.update((o.eid, o.pk) for o, _, _ in new)


def _write_experiences(batch: list) -> None:
    Experience.objects.bulk_create([o for o, _, _ in batch])
    ExperienceSource.objects.bulk_create([s for _, sources, _ in batch for s in sources])
    _create_dated(ExperienceHistory, [h for _, _, history in batch for h in history])


def _relations(p: _Profile, records: Iterable[dict]) -> None:
    rids = set(Relation.objects.filter(profile_id=p.profile.pk).values_list("rid", flat=True))
    new = []
    for r in records:
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


def _legacy_meta(p: _Profile, records: Iterable[dict]) -> None:
    keys = set(LegacyMeta.objects.filter(profile_id=p.profile.pk).values_list("key", flat=True))
    new = []
    for m in records:
        p.add("legacy_meta", "read")
        if m["key"] in keys:
            p.add("legacy_meta", "existing")
            continue
        keys.add(m["key"])
        new.append(LegacyMeta(profile=p.profile, key=m["key"], value=m.get("value") or "",
                              expiration=m.get("expiration"), metadata=m.get("metadata")))
        p.add("legacy_meta", "created")
    p.out.save("legacy meta", LegacyMeta, new)


def _card(p: _Profile, members: dict) -> None:
    """The file's card, unless the profile has one with text (an empty row takes it)."""
    card = members.get("card")
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


def _card_snapshots(p: _Profile, records: Iterable[dict]) -> None:
    have = set(CardSnapshot.objects.filter(profile_id=p.profile.pk).values_list("slice__key", flat=True))
    new = []
    for s in records:
        p.add("card_snapshots", "read")
        if s["slice"] in have or s["slice"] not in p.slices:
            p.add("card_snapshots", "existing")
            continue
        have.add(s["slice"])
        new.append(_dated(CardSnapshot(profile=p.profile, slice=p.slices[s["slice"]], text=s.get("text") or "",
                                       card_version=s.get("card_version") or 0), s))
        p.add("card_snapshots", "created")
    p.out.batched("card snapshots", new, lambda batch: _create_dated(CardSnapshot, batch))


def _favourites(p: _Profile, records: Iterable[dict]) -> None:
    have = set(Favourite.objects.filter(profile_id=p.profile.pk).values_list("message__mid", "excerpt"))
    for chunk in _chunks(records, _chunk_rows(p.out)):
        p.mids.load(f["mid"] for f in chunk)
        _favourite_chunk(p, chunk, have)


def _favourite_chunk(p: _Profile, chunk: list, have: set) -> None:
    new = []
    for f in chunk:
        p.add("favourites", "read")
        if (f["mid"], f.get("excerpt") or "") in have or f["mid"] not in p.mids:
            p.add("favourites", "tombstoned" if ("msg", f["mid"]) in p.tombs else "existing")
            continue
        have.add((f["mid"], f.get("excerpt") or ""))
        new.append(_dated(Favourite(profile=p.profile, message_id=p.mids[f["mid"]], excerpt=f.get("excerpt") or "",
                                    highlight_id=p.hids.get(f.get("hid"))), f))
        p.add("favourites", "created")
    p.out.batched("favourites", new, lambda batch: _create_dated(Favourite, batch))


def _dated(obj, rec: dict):
    """A row whose `created_at` the database fills on insert (auto_now_add), with the file's
    time kept aside for `_create_dated` (issue 25 point 2: the file's time, not the import's)."""
    obj._file_created_at = _dt(rec.get("created_at"))
    return obj


def _create_dated(model, objs: list) -> None:
    """Insert the rows, then give back the file's `created_at` to those that had one."""
    model.objects.bulk_create(objs)
    dated = [o for o in objs if o._file_created_at is not None]
    for o in dated:
        o.created_at = o._file_created_at
    if dated:
        model.objects.bulk_update(dated, ["created_at"])


# Each kind in the order the writes need (tombstones block, slices hold lines, lines are cited),
# whatever its place in the file: each list is read in a pass of its own (memory/interop/full/read.py).
# "card" is a profile's own member, not a list.
STEPS = (("tombstones", _tombstones), ("slices", _slices), ("messages", _messages),
         ("legacy_fragments", _legacy_fragments), ("highlights", _highlights), ("experiences", _experiences),
         ("relations", _relations), ("legacy_meta", _legacy_meta), ("card", _card),
         ("card_snapshots", _card_snapshots), ("favourites", _favourites))
