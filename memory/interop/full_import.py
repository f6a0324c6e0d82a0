"""Full import of our own export (SPEC X2, X4): dedupe by id, tombstones block, all or nothing."""

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DataError, IntegrityError, transaction

from memory.clock import PERIOD_IDS, period_of
from memory.interop.export import FORMAT, VERSION
from memory.interop.legacy.write import BATCH, assign_slices, index_imported
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
    SLICE_KEY_PATTERN,
    MessageSpeaker,
    MessageStatus,
    MessageType,
    SliceCloseReason,
)
from memory.models.curation import (
    ExperienceHistoryActor,
    ExperienceStatus,
    ExperienceTimeCertainty,
    HighlightSource,
    RelationType,
)
from memory.models.deletion import TombstoneKind

KINDS = ("tombstones", "slices", "messages", "legacy_fragments", "highlights", "experiences", "relations",
         "legacy_meta", "card", "card_snapshots", "favourites")
COLUMNS = ("read", "created", "existing", "tombstoned")


class BadExport(Exception):
    """The file is not an export we can read; nothing was written."""


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
SLICE_KEY_RE = re.compile(SLICE_KEY_PATTERN.strip("^").replace("\\d", "[0-9]"))
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
    if not isinstance(value, str) or not SLICE_KEY_RE.fullmatch(value):
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


def import_full(*, data: dict, user, dry_run: bool = False, progress: Callable[[str, int, int], None] | None = None) -> FullReport:
    """Import an export into `user`'s profiles; re-running it changes nothing (X2)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise BadExport(f"export version {data.get('version')!r} is not supported (this app reads {VERSION})")
    profiles = data.get("profiles") or []
    if not isinstance(profiles, list):
        raise BadExport("profiles must be a list")
    for position, pdata in enumerate(profiles):
        check_profile(pdata, position)
    report = FullReport(dry_run=dry_run)
    try:
        if dry_run:
            # S4: the preview only reads — no transaction, so it never holds the write lock
            # (SQLite) while a large file is checked; every row it would write is counted.
            for i, pdata in enumerate(profiles, 1):
                _import_profile(pdata, user=user, report=report, write=False)
                if progress:
                    progress("profiles", i, len(profiles))
        else:
            with transaction.atomic():
                for i, pdata in enumerate(profiles, 1):
                    _import_profile(pdata, user=user, report=report, write=True)
                    if progress:
                        progress("profiles", i, len(profiles))
    except (KeyError, TypeError, ValueError, OverflowError, IntegrityError, DataError) as exc:
        # A value the database's own constraints refuse is as malformed as a missing key.
        raise BadExport(f"malformed export: {exc.__class__.__name__}: {exc}. Nothing was written.") from None
    return report


def _import_profile(pdata: dict, *, user, report: FullReport, write: bool) -> None:
    """One profile of the export. With `write` off (the dry run) nothing is saved: the
    profile may stay unsaved, so existing rows are looked up by `profile_id` (None: none)."""
    key = pdata["key"]
    if not isinstance(key, str) or not PROFILE_KEY_RE.fullmatch(key):
        raise ValueError(f"profile key {key!r} is invalid")
    defaults = {"name": pdata.get("name", ""), "persona": pdata.get("persona", ""),
                "language": pdata.get("language", "zh"), "proactive_enabled": pdata.get("proactive_enabled", True)}
    if write:
        profile, _ = Profile.objects.get_or_create(user=user, key=key, defaults=defaults)
    else:
        profile = Profile.objects.filter(user=user, key=key).first() or Profile(user=user, key=key, **defaults)

    def save(model, objs):
        if write and objs:
            model.objects.bulk_create(objs, batch_size=BATCH)

    # Tombstones first: the file's are imported, then block what they name.
    tombs = set(Tombstone.objects.filter(profile_id=profile.pk).values_list("kind", "object_id"))
    new_tombs = []
    for t in pdata.get("tombstones", []):
        report.add("tombstones", "read")
        ident = (t["kind"], t["object_id"])
        if ident in tombs:
            report.add("tombstones", "existing")
            continue
        tombs.add(ident)
        new_tombs.append(Tombstone(
            profile=profile, kind=t["kind"], object_id=t["object_id"], deleted_at=_dt(t["deleted_at"]),
            expires_at=_dt(t["expires_at"]), content_hash=t.get("content_hash") or "",
            created_at=_dt(t.get("created_at")), legacy_key=t.get("legacy_key") or "",
            legacy_extra=t.get("legacy_extra") or {},
        ))
        report.add("tombstones", "created")
    save(Tombstone, new_tombs)

    slices = {s.key: s for s in Slice.objects.filter(profile_id=profile.pk)}
    new_slices = []
    for s in pdata.get("slices", []):
        report.add("slices", "read")
        if s["key"] in slices:
            report.add("slices", "existing")
            continue
        obj = Slice(profile=profile, key=s["key"], started_at=_dt(s["started_at"]),
                    last_message_at=_dt(s["last_message_at"]), ended_at=_dt(s.get("ended_at")),
                    close_reason=s.get("close_reason") or "", tz=s.get("tz") or "UTC",
                    injected_card=s.get("injected_card"))
        slices[s["key"]] = obj
        new_slices.append(obj)
        report.add("slices", "created")
    save(Slice, new_slices)

    mids = dict(Message.objects.filter(profile_id=profile.pk).values_list("mid", "pk"))
    new_msgs, loose = [], []
    for m in pdata.get("messages", []):
        report.add("messages", "read")
        if ("msg", m["mid"]) in tombs:
            report.add("messages", "tombstoned")
            report.notes.append(f"{key}: message {m['mid']} is tombstoned; skipped")
            continue
        if m["mid"] in mids:
            report.add("messages", "existing")
            continue
        fields = _local_clock({f: m[f] for f in ("mid", "speaker", "message_type", "content", "raw_content", "status",
                                    "local_day_key", "local_hour", "period", "tz", "source_id", "sync_status",
                                    "attachment", "legacy_key", "content_hash", "legacy_extra") if f in m})
        obj = Message(profile=profile, created_at=_dt(m["created_at"]), deleted_at=_dt(m.get("deleted_at")), **fields)
        slice_ = slices.get(m.get("slice"))
        if slice_ is None:
            loose.append(obj)
        else:
            obj.slice = slice_
        mids[obj.mid] = None
        new_msgs.append(obj)
        report.add("messages", "created")
    if write:
        assign_slices(profile=profile, messages=loose)
    save(Message, new_msgs)
    if write:
        index_imported(new_msgs)
    mids.update((m.mid, m.pk) for m in new_msgs)

    frag_keys = set(LegacyFragment.objects.filter(profile_id=profile.pk).values_list("key", flat=True))
    prints = set(LegacyFragment.objects.filter(profile_id=profile.pk).values_list("fingerprint", flat=True))
    new_frags = []
    for f in pdata.get("legacy_fragments", []):
        report.add("legacy_fragments", "read")
        if f["key"] in frag_keys or (f["fingerprint"] in prints and f["disposition"] != "duplicate"):
            report.add("legacy_fragments", "existing")
            continue
        if ("mem", f["key"]) in tombs:
            report.add("legacy_fragments", "tombstoned")
            continue
        frag_keys.add(f["key"])
        prints.add(f["fingerprint"])
        new_frags.append(LegacyFragment(
            profile=profile, message_id=mids.get(f.get("mid")) if f.get("mid") else None,
            **{k: f[k] for k in ("key", "role", "content", "ts", "day_key", "hour", "period", "disposition",
                                 "fingerprint", "legacy_extra")},
        ))
        report.add("legacy_fragments", "created")
    save(LegacyFragment, new_frags)

    hids = dict(Highlight.objects.filter(profile_id=profile.pk).values_list("hid", "pk"))
    new_hls = []
    for h in pdata.get("highlights", []):
        report.add("highlights", "read")
        if ("hl", h["hid"]) in tombs:
            report.add("highlights", "tombstoned")
            continue
        if h["hid"] in hids:
            report.add("highlights", "existing")
            continue
        message_id = mids.get(h["mid"])
        flagged = h.get("flagged") or ("" if message_id else f"message {h['mid']} is missing")
        new_hls.append(Highlight(
            profile=profile, hid=h["hid"], message_id=message_id, mid=h["mid"], content=h["content"],
            source=h.get("source") or "import", created_at=_dt(h["created_at"]), deleted_at=_dt(h.get("deleted_at")),
            flagged=flagged, legacy_key=h.get("legacy_key") or "", legacy_extra=h.get("legacy_extra") or {},
        ))
        hids[h["hid"]] = None
        report.add("highlights", "created")
    save(Highlight, new_hls)
    hids.update((h.hid, h.pk) for h in new_hls)

    eids = dict(Experience.objects.filter(profile_id=profile.pk).values_list("eid", "pk"))
    new_exps = []
    for e in pdata.get("experiences", []):
        report.add("experiences", "read")
        if ("exp", e["eid"]) in tombs:
            report.add("experiences", "tombstoned")
            continue
        if e["eid"] in eids:
            report.add("experiences", "existing")
            continue
        obj = Experience(
            profile=profile, eid=e["eid"], title=e["title"], content=e["content"], status=e["status"],
            time_certainty=e["time_certainty"], event_time=_dt(e.get("event_time")),
            event_time_text=e.get("event_time_text") or "", recorded_at=_dt(e["recorded_at"]),
            invalid_at=_dt(e.get("invalid_at")), deleted_at=_dt(e.get("deleted_at")), flagged=e.get("flagged") or "",
            legacy_key=e.get("legacy_key") or "", legacy_extra=e.get("legacy_extra") or {},
        )
        new_exps.append((obj, e))
        eids[e["eid"]] = None
        report.add("experiences", "created")
    save(Experience, [o for o, _ in new_exps])
    sources, history = [], []
    for obj, e in new_exps:
        for pos, mid in enumerate(dict.fromkeys(e.get("source_mids", []))):
            sources.append(ExperienceSource(experience=obj, mid=mid, message_id=mids.get(mid), position=pos))
        for h in e.get("history", []):
            history.append(ExperienceHistory(experience=obj, actor=h["actor"], action=h["action"],
                                             before=h.get("before"), after=h.get("after"),
                                             reason=h.get("reason") or ""))
    save(ExperienceSource, sources)
    save(ExperienceHistory, history)
    eids.update((o.eid, o.pk) for o, _ in new_exps)

    rids = set(Relation.objects.filter(profile_id=profile.pk).values_list("rid", flat=True))
    new_rels = []
    for r in pdata.get("relations", []):
        report.add("relations", "read")
        if ("rel", r["rid"]) in tombs:
            report.add("relations", "tombstoned")
            continue
        if r["rid"] in rids:
            report.add("relations", "existing")
            continue
        rids.add(r["rid"])
        obj = Relation(
            profile=profile, rid=r["rid"], type=r["type"], from_id=r["from_id"], to_id=r["to_id"],
            from_highlight_id=hids.get(r["from_id"]), to_highlight_id=hids.get(r["to_id"]),
            created_at=_dt(r["created_at"]), deleted_at=_dt(r.get("deleted_at")), flagged=r.get("flagged") or "",
            legacy_key=r.get("legacy_key") or "", legacy_extra=r.get("legacy_extra") or {},
        )
        obj.from_experience_id = None if obj.from_highlight_id else eids.get(r["from_id"])
        obj.to_experience_id = None if obj.to_highlight_id else eids.get(r["to_id"])
        if not obj.flagged and not ((obj.from_highlight_id or obj.from_experience_id)
                                    and (obj.to_highlight_id or obj.to_experience_id)):
            obj.flagged = "missing end"
        new_rels.append(obj)
        report.add("relations", "created")
    save(Relation, new_rels)

    meta_keys = set(LegacyMeta.objects.filter(profile_id=profile.pk).values_list("key", flat=True))
    new_meta = []
    for m in pdata.get("legacy_meta", []):
        report.add("legacy_meta", "read")
        if m["key"] in meta_keys:
            report.add("legacy_meta", "existing")
            continue
        meta_keys.add(m["key"])
        new_meta.append(LegacyMeta(profile=profile, key=m["key"], value=m.get("value") or "",
                                   expiration=m.get("expiration"), metadata=m.get("metadata")))
        report.add("legacy_meta", "created")
    save(LegacyMeta, new_meta)

    card = pdata.get("card")
    if card:
        report.add("card", "read")
        existing = Card.objects.filter(profile_id=profile.pk).first()
        if existing is not None and existing.text.strip():
            report.add("card", "existing")
        elif existing is not None:  # an empty row (opening /card/ makes one) takes the card
            existing.text, existing.format = card.get("text") or "", card.get("format") or "v5"
            existing.version = max(existing.version, card.get("version") or 0)
            if write:
                existing.save(update_fields=["text", "format", "version", "updated_at"])
            report.add("card", "created")
        else:
            if write:
                Card.objects.create(profile=profile, text=card.get("text") or "",
                                    format=card.get("format") or "v5", version=card.get("version") or 0)
            report.add("card", "created")
    have_snapshot = set(CardSnapshot.objects.filter(profile_id=profile.pk).values_list("slice__key", flat=True))
    snapshots = []
    for s in pdata.get("card_snapshots", []):
        report.add("card_snapshots", "read")
        if s["slice"] in have_snapshot or s["slice"] not in slices:
            report.add("card_snapshots", "existing")
            continue
        have_snapshot.add(s["slice"])
        snapshots.append(CardSnapshot(profile=profile, slice=slices[s["slice"]], text=s.get("text") or "",
                                      card_version=s.get("card_version") or 0))
        report.add("card_snapshots", "created")
    save(CardSnapshot, snapshots)

    have_fav = set(Favourite.objects.filter(profile_id=profile.pk).values_list("message__mid", "excerpt"))
    favs = []
    for f in pdata.get("favourites", []):
        report.add("favourites", "read")
        if (f["mid"], f.get("excerpt") or "") in have_fav or f["mid"] not in mids:
            report.add("favourites", "tombstoned" if ("msg", f["mid"]) in tombs else "existing")
            continue
        have_fav.add((f["mid"], f.get("excerpt") or ""))
        favs.append(Favourite(profile=profile, message_id=mids[f["mid"]], excerpt=f.get("excerpt") or "",
                              highlight_id=hids.get(f.get("hid"))))
        report.add("favourites", "created")
    save(Favourite, favs)


def counts_by_kind(report: FullReport) -> dict:
    """kind -> created (the dry-run preview's headline numbers)."""
    out = defaultdict(int)
    for kind, c in report.counts.items():
        out[kind] = c["created"]
    return dict(out)
