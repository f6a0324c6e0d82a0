"""The full import's writes (SPEC X2, S4): each profile's new rows, deduplicated by id against
what it holds and blocked by tombstones, in batches of PREVIOUSLY_IMPORT_BATCH_ROWS rows each in
its own short transaction. The same code, with nothing written, is the checking pass: every row
is asked whether the database would take it (`check.storable`)."""

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cache
from itertools import islice

import numpy as np
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, pgettext_lazy

from memory.clock import PERIOD_IDS
from memory.images import (
    ImageRefused,
    check_image,
    prepare_avatar,
    remove_avatar_files,
    remove_files,
    save_image_files,
    store_avatar,
)
from memory.interop.bulk_insert import (
    insert_rows,
    leave_the_lock,
    new_instance,
    reserve_pks,
    write_in_steps,
)
from memory.interop.export import TRACE_REFS
from memory.interop.full.check import DAY_KEY_RE, storable
from memory.interop.full.read import Files
from memory.interop.full.report import BadExport, FullReport
from memory.interop.legacy.write import assign_slices
from memory.models import (
    Card,
    CardSnapshot,
    CompanionCard,
    Connection,
    EvolutionRun,
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Favourite,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    LoreEntry,
    Message,
    ProactiveSend,
    Profile,
    Relation,
    Slice,
    SliceLogEntry,
    Tombstone,
)
from memory.models.archive import (
    PROFILE_KEY_RE,
)
from memory.recall.index import index_messages, optimize_index

PERIOD_MAX = Message._meta.get_field("period").max_length
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
                        record = f"{_profile_named(self.profile)}, {kind_shown(kind)}{named}"
                        raise BadExport(gettext("%(record)s: %(problem)s") % {"record": record, "problem": problem})
            return
        self.kind = kind
        for start in range(0, len(items), self.rows):
            # In one transaction, or committed after the part in hand when someone begins to wait
            # for the write lock (S4, BENCH §5).
            write_in_steps(items[start:start + self.rows], write)
            self.batches += 1
            if self.progress:
                self.progress(gettext("writing %(kind)s") % {"kind": kind_shown(kind)}, min(start + self.rows, len(items)), len(items))

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
    runs: dict = field(default_factory=dict)  # the file's run ref -> pk (None in the dry run)
    lore: dict = field(default_factory=dict)  # lore position -> pk
    files: Files = field(default_factory=Files)
    linked: bool = False  # a line this import adds has links to set (`_message_links`)

    def __post_init__(self):
        self.mids = _Mids(self.profile.pk, writing=self.out.write)

    def add(self, kind: str, column: str) -> None:
        self.report.add(kind, column)


class _Mids:
    """The profile's message ids as the import needs them, without a million of them held with
    their keys (issue 24 point 6): the keys of one chunk of mids at a time, looked up in the
    database (`load`), and the mids this import adds that the database does not hold yet (which
    also finds a line the file gives twice) — in the checking pass all of them (the chunk's as
    strings, the earlier ones in `_Met`), when writing only those of the chunk being written and
    the lines waiting for a slice (the others are written before the next chunk is looked up).
    A mid added has its key once written, None before."""

    def __init__(self, profile_id, *, writing: bool):
        self.profile_id = profile_id
        self.added: set[str] = set()  # since the last `load`
        self.earlier = None if writing else _Met()  # the checking pass's added before that
        self.met: set[str] = set()  # the chunk's mids among `earlier`
        self.waiting: set[str] = set()  # lines without a slice, written at the end
        self.pks: dict[str, int] = {}

    def load(self, mids: Iterable) -> None:
        """The database's keys of these mids (those it holds), for the chunk being read."""
        wanted = {m for m in mids if isinstance(m, str)}
        if self.earlier is not None:
            self.earlier.add(self.added)
            self.met = self.earlier.among(wanted)
        self.added.clear()  # written (the database has them now), or kept in `earlier`
        self.pks = _message_keys(self.profile_id, wanted) if self.profile_id is not None and wanted else {}

    def __contains__(self, mid) -> bool:
        return mid in self.pks or mid in self.added or mid in self.met or mid in self.waiting

    def get(self, mid):
        return self.pks.get(mid)

    def __getitem__(self, mid):
        return self.pks.get(mid)


class _Met:
    """The mids a checking pass has met, for the file's whole length: 8 bytes each (their
    hashes, in sorted runs that merge as they double, so a few dozen runs at most) where a set of
    the strings took about 95 (issue 24 point 6: 95 MB of a 1M-line preview's 188 MB). A
    chunk's mids are looked up together, one vectorised search a run. Two mids of one hash (about
    one chance in 10^7 at a million lines) would count a new line as given twice: in the
    preview's counts only, as the apply asks the database."""

    def __init__(self):
        self.runs: list[np.ndarray] = []

    def add(self, mids: Collection[str]) -> None:
        if not mids:
            return
        run = np.sort(np.fromiter((hash(m) for m in mids), dtype=np.int64, count=len(mids)))
        while self.runs and len(self.runs[-1]) <= len(run):
            run = np.sort(np.concatenate((self.runs.pop(), run)), kind="stable")  # a merge of two runs
        self.runs.append(run)

    def among(self, mids: Collection[str]) -> set[str]:
        """Those of `mids` met before."""
        if not self.runs or not mids:
            return set()
        mids = list(mids)
        hashes = np.fromiter((hash(m) for m in mids), dtype=np.int64, count=len(mids))
        found = np.zeros(len(mids), dtype=bool)
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, hashes), len(run) - 1)
            found |= run[at] == hashes
        return {mid for mid, met in zip(mids, found, strict=True) if met}


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


SETTINGS_COLUMNS = ("model", "temperature", "quiet_from", "quiet_until", "tz")


def start_profile(key: str, members: dict, *, user, report: FullReport, out: Writes,
                  files: Files | None = None) -> _Profile:
    """One profile of the export, made (or found) before its records, from its own members
    (not its record lists). In the dry run nothing is saved: the profile may stay unsaved, so
    existing rows are looked up by `profile_id` (None: none). A profile this import makes takes
    the file's settings and avatar; one that exists keeps its own."""
    if not isinstance(key, str) or not PROFILE_KEY_RE.fullmatch(key):
        raise ValueError(f"profile key {key!r} is invalid")
    files = files or Files()
    settings_ = members.get("settings") or {}
    defaults = {"name": members.get("name", ""), "persona": members.get("persona", ""),
                "language": members.get("language", "zh"), "proactive_enabled": members.get("proactive_enabled", True),
                **{f: settings_[f] for f in SETTINGS_COLUMNS if settings_.get(f) is not None}}
    out.profile = key
    avatar = _avatar(settings_.get("avatar"), files, f"{_profile_named(key)}, settings.avatar")
    if out.write:
        out.kind = "the profile"
        with transaction.atomic():
            profile, created = Profile.objects.get_or_create(user=user, key=key, defaults=defaults)
        if created:
            _profile_extras(profile, settings_, avatar)
    else:
        profile = Profile.objects.filter(user=user, key=key).first() or Profile(user=user, key=key, **defaults)
        if profile.pk is None:
            out.one("the profile", None, profile)
    return _Profile(profile=profile, key=key, report=report, out=out, files=files)


# What the writes are named by (`Writes.kind`), as a refusal or the progress shows them: each is
# translated in the context "import record" (the catalogue's plain "highlights" is a count's).
KIND_NAMES = {
    "card snapshots": pgettext_lazy("import record", "card snapshots"),
    "evolution runs": pgettext_lazy("import record", "evolution runs"),
    "experiences": pgettext_lazy("import record", "experiences"),
    "favourites": pgettext_lazy("import record", "favourites"),
    "highlights": pgettext_lazy("import record", "highlights"),
    "legacy fragments": pgettext_lazy("import record", "legacy fragments"),
    "legacy meta": pgettext_lazy("import record", "legacy meta"),
    "lorebook entries": pgettext_lazy("import record", "lorebook entries"),
    "message links": pgettext_lazy("import record", "message links"),
    "message slices": pgettext_lazy("import record", "message slices"),
    "messages": pgettext_lazy("import record", "messages"),
    "proactive sends": pgettext_lazy("import record", "proactive sends"),
    "relations": pgettext_lazy("import record", "relations"),
    "slice log": pgettext_lazy("import record", "slice log"),
    "slices": pgettext_lazy("import record", "slices"),
    "the card": pgettext_lazy("import record", "the card"),
    "the companion card": pgettext_lazy("import record", "the companion card"),
    "the profile": pgettext_lazy("import record", "the profile"),
    "the recall index": pgettext_lazy("import record", "the recall index"),
    "tombstones": pgettext_lazy("import record", "tombstones"),
    "the profiles": pgettext_lazy("import record", "the profiles"),
}


# A kind of the report (report.KINDS, the export's field names) by the name of its writes.
REPORTED_AS = {"card": "the card", "companion_card": "the companion card", "lore_entries": "lorebook entries"}


def kind_shown(kind: str) -> str:
    """A write's name, or a report's kind ("legacy_fragments"), in the interface language (a
    name this module does not know, as it is)."""
    return str(KIND_NAMES.get(REPORTED_AS.get(kind, kind.replace("_", " ")), kind))


def _profile_named(key: str) -> str:
    """A profile as a refusal names it: `profile 'owner'`, in the interface language."""
    return gettext("profile %(key)s") % {"key": repr(key)}


def _avatar(meta, files: Files, where: str):
    """The avatar's file checked and re-encoded through memory.images (never stored as given),
    before anything is written; None when the file names none."""
    if not isinstance(meta, dict) or not meta.get("file"):
        return None
    try:
        return prepare_avatar(files.read(meta["file"], where), name=meta.get("name") or "")
    except ImageRefused as exc:
        raise BadExport(gettext("%(record)s: the image %(file)s is refused: %(reason)s") % {
            "record": where, "file": repr(meta["file"]), "reason": exc.reason}) from None


def _profile_extras(profile: Profile, settings_: dict, avatar) -> None:
    """A new profile's time of making as the file has it, its connection found by name (none of
    that name: the server's default), and its avatar's files."""
    fields = {}
    if settings_.get("connection") and any(f.name == "model_connection" for f in Profile._meta.concrete_fields):
        fields["model_connection"] = Connection.objects.filter(name=settings_["connection"]).order_by("pk").first()
    if settings_.get("created_at"):
        fields["created_at"] = _dt(settings_["created_at"])
    if avatar is not None:
        fields["avatar"] = store_avatar(profile=profile, avatar=avatar)
    if fields:
        try:
            with transaction.atomic():
                Profile.objects.filter(pk=profile.pk).update(**fields)
        except BaseException:
            remove_avatar_files(profile.pk, fields.get("avatar"))
            raise


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
    each); only lines without a slice wait for the end, to be given one. An image line's file is
    checked and re-encoded through memory.images, and in the apply stored before its batch is
    written. A line's links (`reply_of`, `prompt_trace`) are set once every line is in
    (`_message_links`, a pass of its own)."""
    loose, written, files = [], False, []  # files: (mid, paths) stored for lines not written yet
    n = -1
    try:
        for chunk in _chunks(records, _chunk_rows(p.out)):
            p.mids.load(m["mid"] for m in chunk)
            new = []
            for m in chunk:
                n += 1
                p.add("messages", "read")
                if ("msg", m["mid"]) in p.tombs:
                    p.add("messages", "tombstoned")
                    p.report.notes.append(gettext("%(profile)s: message %(mid)s is tombstoned; skipped") % {
                        "profile": p.key, "mid": m["mid"]})
                    continue
                if m["mid"] in p.mids:
                    p.add("messages", "existing")
                    continue
                obj = _message(p.profile, m)
                obj.attachment = _attachment(p, obj, m.get("attachment"), files,
                                             lambda n=n, obj=obj: f"{_profile_named(p.key)}, messages[{n}] ({obj.mid!r})")
                p.mids.added.add(obj.mid)
                p.add("messages", "created")
                if m.get("reply_of") or m.get("prompt_trace"):
                    p.linked = True
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
            files = [(mid, paths) for mid, paths in files if mid in p.mids.waiting]  # the others are in
        if loose:
            # Their slices go in first, in one transaction (far fewer rows than lines); with none,
            # nothing is asked (it read the profile's slices: 3.8 s of a 20k-line apply).
            p.out.one("message slices", lambda: assign_slices(profile=p.profile, messages=loose))
            p.out.batched("messages", loose, _write_messages)
    except BaseException:
        # The files of lines that were not written go again (a run of the same import stores them anew).
        if files and p.profile.pk:
            have = set(_message_keys(p.profile.pk, [mid for mid, _ in files]))
            remove_files([path for mid, paths in files if mid not in have for path in paths])
        raise
    if p.out.write and (written or loose):
        optimize_index(between=leave_the_lock)  # in short steps, the write lock free between them (S4)


def _message(profile: Profile, m: dict) -> Message:
    """The row of a line of the file, made from its column values in order (`new_instance`:
    keyword arguments cost ~100 µs a row, issue 24 point 6); every column the file does not give
    takes its default."""
    values = list(_message_defaults())
    values[_MESSAGE_AT["legacy_extra"]] = {}  # a default of its own (a dict is changed in place)
    fields = _local_clock({f: m[f] for f in MESSAGE_COLUMNS if f in m})
    fields.update(profile_id=profile.pk, created_at=_dt(m["created_at"]), deleted_at=_dt(m.get("deleted_at")),
                  reviewed_at=_dt(m.get("reviewed_at")))
    for name, value in fields.items():
        values[_MESSAGE_AT[name]] = value
    obj = new_instance(Message, values)
    Message.profile.field.set_cached_value(obj, profile)
    return obj


_MESSAGE_AT = {f.attname: i for i, f in enumerate(Message._meta.concrete_fields)}


@cache
def _message_defaults() -> tuple:
    return tuple(None if f.primary_key else f.get_default() for f in Message._meta.concrete_fields)


def _chunk_rows(out: Writes) -> int:
    """Records read together (their mids looked up in one query): whole batches when writing."""
    return out.rows * max(1, 1000 // out.rows) if out.write else 1000


def _attachment(p: _Profile, obj: Message, meta, written: list, record: Callable[[], str]):
    """The attachment a line is stored with. A file the export holds (`file`, a zip member) is
    checked and re-encoded as an upload is (memory.images), never stored as given; storage
    paths a file names are never kept (a path is where this server put a file it wrote).
    `record()` names the line for a refusal (made only then: ~16 µs a line, issue 24 point 6)."""
    if not isinstance(meta, dict):
        return meta
    if not meta.get("file"):
        return {k: v for k, v in meta.items() if k not in ("path", "thumb")}
    where = record()
    try:
        checked = check_image(p.files.read(meta["file"], where), name=meta.get("name") or "")
    except ImageRefused as exc:
        raise BadExport(gettext("%(record)s: the image %(file)s is refused: %(reason)s") % {
            "record": where, "file": repr(meta["file"]), "reason": exc.reason}) from None
    if not p.out.write:
        return {k: v for k, v in meta.items() if k != "file"}
    attachment, paths = save_image_files(profile_id=p.profile.pk, mid=obj.mid, checked=checked)
    written.append((obj.mid, paths))
    return attachment


def _write_messages(batch: list) -> None:
    """The batch by plain `executemany` (issue 24 point 6: `bulk_create`'s query compiler was a
    third of an apply) with keys reserved for it first (no read-back inside the transaction,
    S4), then indexed for recall."""
    for m, pk in zip(batch, reserve_pks(Message, len(batch)), strict=True):
        m.pk = pk
        m._state.adding = False
    insert_rows(Message, batch, with_pk=True)
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
            reviewed_at=_dt(h.get("reviewed_at")), flagged=flagged, legacy_key=h.get("legacy_key") or "", legacy_extra=h.get("legacy_extra") or {},
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
            invalid_at=_dt(e.get("invalid_at")), deleted_at=_dt(e.get("deleted_at")),
            reviewed_at=_dt(e.get("reviewed_at")), flagged=e.get("flagged") or "",
            legacy_key=e.get("legacy_key") or "", legacy_extra=e.get("legacy_extra") or {},
        )
        obj._file_updated_at = _dt(e.get("updated_at"))
        sources = [ExperienceSource(experience=obj, mid=mid, message_id=p.mids.get(mid), position=pos)
                   for pos, mid in enumerate(dict.fromkeys(e.get("source_mids", [])))]
        history = [_dated(ExperienceHistory(experience=obj, actor=h["actor"], action=h["action"],
                                            before=h.get("before"), after=h.get("after"), reason=h.get("reason") or "",
                                            run_id=p.runs.get(h.get("run")),
                                            actor_user=p.profile.user if h.get("by_owner") else None),
                          h) for h in e.get("history", [])]
        new.append((obj, sources, history))
        p.eids[e["eid"]] = None
        p.add("experiences", "created")
    p.out.batched("experiences", new, _write_experiences)
    p.eids.update((o.eid, o.pk) for o, _, _ in new)


def _write_experiences(batch: list) -> None:
    experiences = [o for o, _, _ in batch]
    Experience.objects.bulk_create(experiences)
    dated = [o for o in experiences if o._file_updated_at is not None]
    for o in dated:  # the file's time of the last change, not the import's (`auto_now`)
        o.updated_at = o._file_updated_at
    if dated:
        Experience.objects.bulk_update(dated, ["updated_at"])
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
        created_at=_dt(r["created_at"]), deleted_at=_dt(r.get("deleted_at")), reviewed_at=_dt(r.get("reviewed_at")),
        flagged=r.get("flagged") or "",
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
    updated = _dt(card.get("updated_at"))
    if existing is not None:  # an empty row (opening /card/ makes one) takes the card
        existing.text, existing.format = card.get("text") or "", card.get("format") or "v5"
        existing.version = max(existing.version, card.get("version") or 0)
        row = existing
        save = lambda: existing.save(update_fields=["text", "format", "version", "updated_at"])  # noqa: E731
    else:
        row = Card(profile=p.profile, text=card.get("text") or "", format=card.get("format") or "v5",
                   version=card.get("version") or 0)
        save = row.save

    def write() -> None:
        save()
        if updated:  # the file's time, not the import's (`updated_at` is set on every save)
            Card.objects.filter(pk=row.pk).update(updated_at=updated)
    p.out.one("the card", write, row)
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
                                       card_version=s.get("card_version") or 0, run_id=p.runs.get(s.get("run"))), s))
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


def _evolution_runs(p: _Profile, records: Iterable[dict]) -> None:
    """The card's evolution runs with their steps and diffs (K10), deduplicated by when they were
    made and their trigger; the file names each by a ref its other records use."""
    have = {(at, trigger): pk for at, trigger, pk in
            EvolutionRun.objects.filter(profile_id=p.profile.pk).values_list("created_at", "trigger", "pk")}
    new = []
    for r in records:
        p.add("evolution_runs", "read")
        ident = (_aware(_dt(r["created_at"])), r["trigger"])
        if ident in have:
            p.runs[r["ref"]] = have[ident]
            p.add("evolution_runs", "existing")
            continue
        obj = EvolutionRun(profile=p.profile, slice=p.slices.get(r.get("slice")), **{
            f: r[f] for f in ("trigger", "status", "skip_reason", "summary", "diff", "steps", "model_name", "error",
                              "attempts", "card_before", "card_after") if r.get(f) is not None},
            started_at=_dt(r.get("started_at")), finished_at=_dt(r.get("finished_at")))
        obj._file_created_at, obj._ref = _dt(r["created_at"]), r["ref"]
        have[ident] = None
        new.append(obj)
        p.add("evolution_runs", "created")
    p.out.batched("evolution runs", new, lambda batch: _create_dated(EvolutionRun, batch))
    p.runs.update((o._ref, o.pk) for o in new)


def _aware(value):
    """A time as the database gives it back (a naive one is in the default zone), to compare."""
    return timezone.make_aware(value) if value is not None and timezone.is_naive(value) else value


def _slice_log(p: _Profile, records: Iterable[dict]) -> None:
    """The slices' cognitive logs (S2), each entry once (by slice, time, kind and summary)."""
    have = set(SliceLogEntry.objects.filter(slice__profile_id=p.profile.pk)
               .values_list("slice__key", "created_at", "kind", "summary")) if p.profile.pk else set()
    new = []
    for e in records:
        p.add("slice_log", "read")
        ident = (e["slice"], _aware(_dt(e["created_at"])), e["kind"], e.get("summary") or "")
        if ident in have or e["slice"] not in p.slices:
            p.add("slice_log", "existing")
            continue
        have.add(ident)
        data = e.get("data") if isinstance(e.get("data"), dict) else {}
        if "run_id" in data:
            data = {**data, "run_id": p.runs.get(data["run_id"])}
        new.append(_dated(SliceLogEntry(slice=p.slices[e["slice"]], kind=e["kind"], summary=e.get("summary") or "",
                                        data=data), e))
        p.add("slice_log", "created")
    p.out.batched("slice log", new, lambda batch: _create_dated(SliceLogEntry, batch))


def _lore_entries(p: _Profile, records: Iterable[dict]) -> None:
    """The companion's lorebook (H2), by position."""
    p.lore = dict(LoreEntry.objects.filter(profile_id=p.profile.pk).values_list("position", "pk"))
    new = []
    for e in records:
        p.add("lore_entries", "read")
        if e["position"] in p.lore:
            p.add("lore_entries", "existing")
            continue
        new.append(LoreEntry(profile=p.profile, **{
            f: e[f] for f in ("position", "name", "keys", "secondary_keys", "content", "enabled", "constant",
                              "selective", "case_sensitive", "insertion_order", "priority", "extra") if f in e}))
        p.lore[e["position"]] = None
        p.add("lore_entries", "created")
    p.out.save("lorebook entries", LoreEntry, new)
    p.lore.update((o.position, o.pk) for o in new)


def _companion_card(p: _Profile, members: dict) -> None:
    """The character card the companion was made from (H2), unless the profile has one."""
    card = members.get("companion_card")
    if not card:
        return
    p.add("companion_card", "read")
    if CompanionCard.objects.filter(profile_id=p.profile.pk).exists():
        p.add("companion_card", "existing")
        return
    row = CompanionCard(profile=p.profile, imported_at=_dt(card.get("imported_at")), **{
        f: card[f] for f in ("identity", "spec", "data", "book", "persona_built", "source_name") if f in card})
    p.out.one("the companion card", row.save, row)
    p.add("companion_card", "created")


def _proactive_sends(p: _Profile, records: Iterable[dict]) -> None:
    """The messages the companion wrote first (K15), by subject (each occasion once); their
    lines' keys looked up a chunk at a time."""
    have = set(ProactiveSend.objects.filter(profile_id=p.profile.pk).values_list("subject", flat=True))
    for chunk in _chunks(records, _chunk_rows(p.out)):
        p.mids.load(s.get("mid") for s in chunk)
        new = []
        for s in chunk:
            p.add("proactive_sends", "read")
            if s["subject"] in have:
                p.add("proactive_sends", "existing")
                continue
            have.add(s["subject"])
            new.append(ProactiveSend(profile=p.profile, day=date.fromisoformat(s["day"]), reason=s["reason"],
                                     subject=s["subject"], message_id=p.mids.get(s.get("mid")),
                                     **({"created_at": _dt(s["created_at"])} if s.get("created_at") else {})))
            p.add("proactive_sends", "created")
        p.out.save("proactive sends", ProactiveSend, new)


def _message_links(p: _Profile, records: Iterable[dict]) -> None:
    """The new lines' links to other rows, once all are in: a reply's user line (`reply_of`, how
    alternatives group, U2) and what its prompt held (U4), by this account's keys. The lines are
    read again, in a pass of their own, a chunk at a time: the keys of the mids a chunk's lines
    and their links name are looked up together by the unique (profile, mid) index (issue 24
    point 6: no profile's ids are all held). A line is given its links only if it has none yet
    (one this import wrote; one an interrupted import wrote finishes with the same import again)."""
    if not (p.out.write and p.linked):
        for _ in records:  # the checking pass links nothing: a line's links are not columns it checks
            pass
        return
    names = {"highlights": p.hids, "experiences": p.eids, "lore": p.lore}
    for chunk in _chunks((m for m in records if m.get("reply_of") or m.get("prompt_trace")), _chunk_rows(p.out)):
        wanted = {m["mid"] for m in chunk}
        for m in chunk:
            if isinstance(m.get("reply_of"), str):
                wanted.add(m["reply_of"])
            trace = m.get("prompt_trace")
            if isinstance(trace, dict) and isinstance(trace.get("recalled"), list):
                wanted.update(ref for ref in trace["recalled"] if isinstance(ref, str))
        keys = _message_keys(p.profile.pk, wanted)
        unlinked = set(Message.objects.filter(pk__in=[keys[m["mid"]] for m in chunk if m["mid"] in keys],
                                              reply_of__isnull=True, prompt_trace__isnull=True)
                       .order_by().values_list("pk", flat=True))
        linked = []
        for m in chunk:
            pk = keys.get(m["mid"])
            if pk not in unlinked:
                continue
            obj = Message(pk=pk)
            obj.reply_of_id = keys.get(m["reply_of"]) if m.get("reply_of") else None
            trace = m.get("prompt_trace")
            if isinstance(trace, dict):
                table = {**names, "recalled": keys}
                trace = {**trace, **{part: [table[part][ref] for ref in trace[part] if table[part].get(ref)]
                                     for part in TRACE_REFS if isinstance(trace.get(part), list)}}
            obj.prompt_trace = trace
            linked.append(obj)
        p.out.batched("message links", linked,
                      lambda batch: Message.objects.bulk_update(batch, ["reply_of", "prompt_trace"]))


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


# Each kind in the order the writes need (tombstones block, slices hold lines, runs are named by
# lines' history, lines are cited), whatever its place in the file: each list is read in a pass of
# its own (memory/interop/full/read.py). "card" and "companion_card" are a profile's own members,
# not lists; the lines are read a second time, last, for their links (only when some are to set).
STEPS = (("tombstones", _tombstones), ("slices", _slices), ("evolution_runs", _evolution_runs),
         ("slice_log", _slice_log), ("messages", _messages), ("legacy_fragments", _legacy_fragments),
         ("highlights", _highlights), ("experiences", _experiences), ("relations", _relations),
         ("legacy_meta", _legacy_meta), ("card", _card), ("card_snapshots", _card_snapshots),
         ("favourites", _favourites), ("lore_entries", _lore_entries), ("companion_card", _companion_card),
         ("proactive_sends", _proactive_sends), ("messages", _message_links))


def step_needed(step, profiles: list) -> bool:
    """Whether a pass over the file is needed for this step: the links' pass only when a line
    this import writes has links."""
    return step is not _message_links or any(p.out.write and p.linked for p in profiles)
