"""Full export (SPEC X1): our versioned JSON, and the legacy KV bulk-put shape.

The JSON holds everything of the chosen profiles, tombstones included (defect P2).
The kv shape gives each imported record back under its original key with the value
it had (A6); documented differences from the imported dump:
- suppressed fragments (words of a hard-deleted message, P0-2) are not exported;
- records skipped at import (tombstoned, bad with --skip-bad) are not there to export;
- messages born from orphan fragments, and messages written by the new app, appear
  as `msg:<profile>:<mid>` records under their own (deterministic) ids;
- values are re-serialised JSON: compare them parsed, not as text.
"""

import base64
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from django.db.models import Prefetch
from django.utils import timezone

from memory.interop import legacy_shapes as shapes
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

FORMAT = "previously-export"
VERSION = 1


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _row(obj, fields: Iterable[str]) -> dict:
    out = {}
    for name in fields:
        value = getattr(obj, name)
        out[name] = _iso(value) if isinstance(value, datetime) else value
    return out


MESSAGE_FIELDS = (
    "mid", "speaker", "message_type", "content", "raw_content", "status", "created_at", "local_day_key",
    "local_hour", "period", "tz", "source_id", "sync_status", "deleted_at", "attachment", "legacy_key",
    "content_hash", "legacy_extra",
)
SLICE_FIELDS = ("key", "started_at", "last_message_at", "ended_at", "close_reason", "tz", "injected_card")
HIGHLIGHT_FIELDS = ("hid", "mid", "content", "source", "created_at", "deleted_at", "flagged", "legacy_key",
                    "legacy_extra")
EXPERIENCE_FIELDS = ("eid", "title", "content", "status", "time_certainty", "event_time", "event_time_text",
                     "recorded_at", "invalid_at", "deleted_at", "flagged", "legacy_key", "legacy_extra")
HISTORY_FIELDS = ("actor", "action", "before", "after", "reason", "created_at")
RELATION_FIELDS = ("rid", "type", "from_id", "to_id", "created_at", "deleted_at", "flagged", "legacy_key",
                   "legacy_extra")
FRAGMENT_FIELDS = ("key", "role", "content", "ts", "day_key", "hour", "period", "disposition", "fingerprint",
                   "legacy_extra")
META_FIELDS = ("key", "value", "expiration", "metadata")
TOMBSTONE_FIELDS = ("kind", "object_id", "deleted_at", "expires_at", "content_hash", "created_at", "legacy_key",
                    "legacy_extra")
CARD_FIELDS = ("text", "format", "version", "updated_at")


def export_profile(profile: Profile) -> dict:
    """Everything of one profile as plain JSON-able data."""
    messages = Message.objects.filter(profile=profile).select_related("slice").order_by("created_at", "id")
    experiences = Experience.objects.filter(profile=profile).prefetch_related(
        Prefetch("source_links", queryset=ExperienceSource.objects.order_by("position")),
        Prefetch("history", queryset=ExperienceHistory.objects.order_by("created_at", "id")),
    )
    card = Card.objects.filter(profile=profile).first()
    return {
        "key": profile.key,
        "name": profile.name,
        "persona": profile.persona,
        "language": profile.language,
        "proactive_enabled": profile.proactive_enabled,
        "slices": [_row(s, SLICE_FIELDS) for s in Slice.objects.filter(profile=profile).order_by("started_at")],
        "messages": [
            {**_row(m, MESSAGE_FIELDS), "slice": m.slice.key, "fragment_keys": []} for m in messages.iterator(2000)
        ],
        "highlights": [_row(h, HIGHLIGHT_FIELDS) for h in Highlight.objects.filter(profile=profile)],
        "experiences": [
            {
                **_row(e, EXPERIENCE_FIELDS),
                "source_mids": [s.mid for s in e.source_links.all()],
                "history": [_row(h, HISTORY_FIELDS) for h in e.history.all()],
            }
            for e in experiences
        ],
        "relations": [_row(r, RELATION_FIELDS) for r in Relation.objects.filter(profile=profile)],
        "legacy_fragments": [
            {**_row(f, FRAGMENT_FIELDS), "mid": f.message.mid if f.message else None}
            for f in LegacyFragment.objects.filter(profile=profile).select_related("message").iterator(2000)
        ],
        "legacy_meta": [_row(m, META_FIELDS) for m in LegacyMeta.objects.filter(profile=profile)],
        "card": _row(card, CARD_FIELDS) if card else None,
        "card_snapshots": [
            {"slice": s.slice.key, "text": s.text, "card_version": s.card_version, "created_at": _iso(s.created_at)}
            for s in CardSnapshot.objects.filter(profile=profile).select_related("slice")
        ],
        "tombstones": [_row(t, TOMBSTONE_FIELDS) for t in Tombstone.objects.filter(profile=profile)],
        "favourites": [
            {"mid": f.message.mid, "excerpt": f.excerpt, "hid": f.highlight.hid if f.highlight else None,
             "created_at": _iso(f.created_at)}
            for f in Favourite.objects.filter(profile=profile).select_related("message", "highlight").order_by("created_at", "id")
        ],
    }


def export_json(*, profiles: Iterable[Profile]) -> dict:
    """The full export of these profiles in our own versioned format (X1)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": timezone.now().isoformat(),
        "profiles": [export_profile(p) for p in profiles],
    }


# --------------------------------------------------------------------------- legacy kv shape


def _kv_entry(key: str, value, extra: dict, **defaults) -> dict:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    kv = {**defaults, **(extra.get(shapes.KV) or {})}
    item = {"key": key, "value": text}
    if kv.pop("base64", False):
        item["value"] = base64.b64encode(text.encode("utf-8")).decode("ascii")
        item["base64"] = True
    item.update(kv)
    return item


def _own_key(key: str, profile: Profile) -> str:
    """A legacy key under the profile the record belongs to now: a record imported under
    `owner` because its profile failed P1's regex exports as owner's, not under the old key."""
    family = key.split(":", 1)[0]
    if family not in ("msg", "mem", "hl", "exp", "rel", "tomb") or ":" not in key:
        return key  # mem_<ts> (v0) and meta keys have no profile part
    tail = key.split(":")[-2 if family == "tomb" else -1:]
    own = ":".join([family, profile.key, *tail])
    return key if key == own else own


def _msg_entry(profile: Profile, m: Message) -> dict:
    extra = m.legacy_extra or {}
    if m.legacy_key.startswith("msg:"):
        value = shapes.write_value("msg", m.__dict__, extra)
        if "profile_id" in value:
            value["profile_id"] = profile.key
        return _kv_entry(_own_key(m.legacy_key, profile), value, extra)
    # Born from an orphan fragment or written by the new app: its own id, the legacy shape.
    cols = dict(m.__dict__)
    value = shapes.write_value("msg", cols, {})
    value = {"profile_id": profile.key, "conversation_id": m.slice.key if m.slice_id else None, **value}
    return _kv_entry(f"msg:{profile.key}:{m.mid}", value, {})


def export_kv(*, profiles: Iterable[Profile]) -> Iterator[dict]:
    """The profiles as wrangler bulk-put entries with the legacy keys and value shapes."""
    for profile in profiles:
        p = profile.key
        for t in Tombstone.objects.filter(profile=profile):
            extra = t.legacy_extra or {}
            key = _own_key(t.legacy_key, profile) if t.legacy_key else f"tomb:{p}:{t.kind}:{t.object_id}"
            yield _kv_entry(key, shapes.write_value("tomb", t.__dict__, extra), extra,
                            expiration=int(t.expires_at.timestamp()))
        for m in Message.objects.filter(profile=profile).select_related("slice").order_by("created_at", "id").iterator(2000):
            yield _msg_entry(profile, m)
        for f in LegacyFragment.objects.filter(profile=profile).exclude(
            disposition=LegacyFragment.Disposition.SUPPRESSED
        ).iterator(2000):
            extra = f.legacy_extra or {}
            yield _kv_entry(_own_key(f.key, profile), shapes.write_value("mem", f.__dict__, extra), extra)
        for h in Highlight.objects.filter(profile=profile):
            extra = h.legacy_extra or {}
            value = shapes.write_value("hl", h.__dict__, extra)
            if not h.legacy_key:
                value["source"] = h.source
            yield _kv_entry(_own_key(h.legacy_key, profile) if h.legacy_key else f"hl:{p}:{h.hid}", value, extra)
        for e in Experience.objects.filter(profile=profile).prefetch_related(
            Prefetch("source_links", queryset=ExperienceSource.objects.order_by("position"))
        ):
            extra = e.legacy_extra or {}
            cols = {**e.__dict__, "source_mids": [s.mid for s in e.source_links.all()]}
            yield _kv_entry(_own_key(e.legacy_key, profile) if e.legacy_key else f"exp:{p}:{e.eid}",
                            shapes.write_value("exp", cols, extra), extra)
        for r in Relation.objects.filter(profile=profile):
            extra = r.legacy_extra or {}
            yield _kv_entry(_own_key(r.legacy_key, profile) if r.legacy_key else f"rel:{p}:{r.rid}",
                            shapes.write_value("rel", r.__dict__, extra), extra)
        for meta in LegacyMeta.objects.filter(profile=profile):
            yield _meta_entry(meta)


def export_global_meta() -> Iterator[dict]:
    """meta_* keys that belonged to no profile (staff exports of everything only)."""
    for meta in LegacyMeta.objects.filter(profile__isnull=True):
        yield _meta_entry(meta)


def _meta_entry(meta: LegacyMeta) -> dict:
    item = {"key": meta.key, "value": meta.value}
    metadata = meta.metadata
    rest = {}
    if isinstance(metadata, dict) and shapes.KV in metadata:
        rest = dict(metadata[shapes.KV])
        metadata = metadata.get("metadata")
    if meta.expiration is not None:
        item["expiration"] = meta.expiration
    if metadata is not None:
        item["metadata"] = metadata
    if rest.pop("base64", False):
        item["value"] = base64.b64encode(meta.value.encode("utf-8")).decode("ascii")
        item["base64"] = True
    item.update(rest)
    return item


def write_kv(entries: Iterable[dict], out) -> int:
    """Stream entries as a bulk-put JSON array to a text file; returns the count."""
    n = 0
    out.write("[")
    for item in entries:
        out.write(("," if n else "") + "\n" + json.dumps(item, ensure_ascii=False))
        n += 1
    out.write("\n]\n")
    return n


def profiles_for(*, user=None, profile_key: str | None = None):
    """The profiles an export covers: one user's (optionally one key), or everyone's."""
    qs = Profile.objects.all()
    if user is not None:
        qs = qs.filter(user=user)
    if profile_key:
        qs = qs.filter(key=profile_key)
    return qs.order_by("user_id", "key")


__all__ = ["UTC", "export_json", "export_kv", "profiles_for", "write_kv"]
