"""Full import of our own export (SPEC X2, X4): dedupe by id, tombstones block, all or nothing."""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DataError, IntegrityError, transaction

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
from memory.models.archive import PROFILE_KEY_RE

KINDS = ("tombstones", "slices", "messages", "legacy_fragments", "highlights", "experiences", "relations",
         "legacy_meta", "card", "card_snapshots", "favourites")
COLUMNS = ("read", "created", "existing", "tombstoned")


class BadExport(Exception):
    """The file is not an export we can read; nothing was written."""


class _DryRun(Exception):
    pass


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


def import_full(*, data: dict, user, dry_run: bool = False, progress: Callable[[str, int, int], None] | None = None) -> FullReport:
    """Import an export into `user`'s profiles; re-running it changes nothing (X2)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BadExport(f"not a Previously export (expected format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise BadExport(f"export version {data.get('version')!r} is not supported (this app reads {VERSION})")
    report = FullReport(dry_run=dry_run)
    try:
        with transaction.atomic():
            profiles = data.get("profiles") or []
            for i, pdata in enumerate(profiles, 1):
                _import_profile(pdata, user=user, report=report)
                if progress:
                    progress("profiles", i, len(profiles))
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    except (KeyError, TypeError, ValueError, OverflowError, IntegrityError, DataError) as exc:
        # A value the database's own constraints refuse is as malformed as a missing key.
        raise BadExport(f"malformed export: {exc.__class__.__name__}: {exc}. Nothing was written.") from None
    return report


def _import_profile(pdata: dict, *, user, report: FullReport) -> None:
    key = pdata["key"]
    if not PROFILE_KEY_RE.match(key):
        raise ValueError(f"profile key {key!r} is invalid")
    profile, _ = Profile.objects.get_or_create(
        user=user, key=key,
        defaults={"name": pdata.get("name", ""), "persona": pdata.get("persona", ""),
                  "language": pdata.get("language", "zh"), "proactive_enabled": pdata.get("proactive_enabled", True)},
    )
    # Tombstones first: the file's are imported, then block what they name.
    tombs = set(Tombstone.objects.filter(profile=profile).values_list("kind", "object_id"))
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
    Tombstone.objects.bulk_create(new_tombs, batch_size=BATCH)

    slices = {s.key: s for s in Slice.objects.filter(profile=profile)}
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
    Slice.objects.bulk_create(new_slices, batch_size=BATCH)

    mids = dict(Message.objects.filter(profile=profile).values_list("mid", "pk"))
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
        fields = {f: m[f] for f in ("mid", "speaker", "message_type", "content", "raw_content", "status",
                                    "local_day_key", "local_hour", "period", "tz", "source_id", "sync_status",
                                    "attachment", "legacy_key", "content_hash", "legacy_extra") if f in m}
        obj = Message(profile=profile, created_at=_dt(m["created_at"]), deleted_at=_dt(m.get("deleted_at")), **fields)
        slice_ = slices.get(m.get("slice"))
        if slice_ is None:
            loose.append(obj)
        else:
            obj.slice = slice_
        mids[obj.mid] = None
        new_msgs.append(obj)
        report.add("messages", "created")
    assign_slices(profile=profile, messages=loose)
    Message.objects.bulk_create(new_msgs, batch_size=BATCH)
    index_imported(new_msgs)
    mids.update((m.mid, m.pk) for m in new_msgs)

    frag_keys = set(LegacyFragment.objects.filter(profile=profile).values_list("key", flat=True))
    prints = set(LegacyFragment.objects.filter(profile=profile).values_list("fingerprint", flat=True))
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
    LegacyFragment.objects.bulk_create(new_frags, batch_size=BATCH)

    hids = dict(Highlight.objects.filter(profile=profile).values_list("hid", "pk"))
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
    Highlight.objects.bulk_create(new_hls, batch_size=BATCH)
    hids.update((h.hid, h.pk) for h in new_hls)

    eids = dict(Experience.objects.filter(profile=profile).values_list("eid", "pk"))
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
    Experience.objects.bulk_create([o for o, _ in new_exps], batch_size=BATCH)
    sources, history = [], []
    for obj, e in new_exps:
        for pos, mid in enumerate(dict.fromkeys(e.get("source_mids", []))):
            sources.append(ExperienceSource(experience=obj, mid=mid, message_id=mids.get(mid), position=pos))
        for h in e.get("history", []):
            history.append(ExperienceHistory(experience=obj, actor=h["actor"], action=h["action"],
                                             before=h.get("before"), after=h.get("after"),
                                             reason=h.get("reason") or ""))
    ExperienceSource.objects.bulk_create(sources, batch_size=BATCH)
    ExperienceHistory.objects.bulk_create(history, batch_size=BATCH)
    eids.update((o.eid, o.pk) for o, _ in new_exps)

    rids = set(Relation.objects.filter(profile=profile).values_list("rid", flat=True))
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
    Relation.objects.bulk_create(new_rels, batch_size=BATCH)

    meta_keys = set(LegacyMeta.objects.filter(profile=profile).values_list("key", flat=True))
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
    LegacyMeta.objects.bulk_create(new_meta, batch_size=BATCH)

    card = pdata.get("card")
    if card:
        report.add("card", "read")
        existing = Card.objects.filter(profile=profile).first()
        if existing is not None and existing.text.strip():
            report.add("card", "existing")
        elif existing is not None:  # an empty row (opening /card/ makes one) takes the card
            existing.text, existing.format = card.get("text") or "", card.get("format") or "v5"
            existing.version = max(existing.version, card.get("version") or 0)
            existing.save(update_fields=["text", "format", "version", "updated_at"])
            report.add("card", "created")
        else:
            Card.objects.create(profile=profile, text=card.get("text") or "", format=card.get("format") or "v5",
                                version=card.get("version") or 0)
            report.add("card", "created")
    have_snapshot = set(CardSnapshot.objects.filter(profile=profile).values_list("slice__key", flat=True))
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
    CardSnapshot.objects.bulk_create(snapshots, batch_size=BATCH)

    have_fav = set(Favourite.objects.filter(profile=profile).values_list("message__mid", "excerpt"))
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
    Favourite.objects.bulk_create(favs, batch_size=BATCH)


def counts_by_kind(report: FullReport) -> dict:
    """kind -> created (the dry-run preview's headline numbers)."""
    out = defaultdict(int)
    for kind, c in report.counts.items():
        out[kind] = c["created"]
    return dict(out)
