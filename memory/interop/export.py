"""Full export (SPEC X1): our versioned JSON (a zip of it and the image files when there are
images), and the legacy KV bulk-put shape.

The JSON holds everything of the chosen profiles that is stored, tombstones included (defect
P2); issue 28 point 4 (version 2) added images, companion settings and card, the lorebook,
alternatives (`reply_of`), prompt traces, evolution runs, slice logs and proactive sends.
`NOT_EXPORTED` names every model whose rows are left out, and why: a test enumerates the models
so that a kind added later is either exported or named there. Never in an export: keys,
password hashes, sessions, invitations, reset tokens, or another person's rows.
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
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.core.files.storage import default_storage
from django.db.models import Prefetch
from django.utils import timezone

from memory.images import attachment_paths, avatar_paths
from memory.interop import legacy_shapes as shapes
from memory.models import (
    Card,
    CardSnapshot,
    CompanionCard,
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

FORMAT = "previously-export"
VERSION = 2  # 2 (issue 28 point 4): every stored kind, images in a zip; 1 is still imported
VERSIONS_READ = (1, 2)
JSON_MEMBER = "export.json"  # the JSON's name inside a zip export

# The models whose rows an export carries (`export_profile` below writes each of them).
EXPORTED = (
    "memory.Profile", "memory.Slice", "memory.SliceLogEntry", "memory.Message", "memory.Card",
    "memory.CardSnapshot", "memory.EvolutionRun", "memory.CompanionCard", "memory.LoreEntry",
    "memory.Highlight", "memory.Favourite", "memory.Experience", "memory.ExperienceSource",
    "memory.ExperienceHistory", "memory.Relation", "memory.Tombstone", "memory.LegacyFragment",
    "memory.LegacyMeta", "memory.ProactiveSend",
)# Fields of those models the export writes under another name (a link by the id it names).
EXPORTED_AS = {
    "memory.Highlight.message": "mid", "memory.Favourite.message": "mid", "memory.Favourite.highlight": "hid",
    "memory.LegacyFragment.message": "mid", "memory.ProactiveSend.message": "mid",
    "memory.ExperienceHistory.actor_user": "by_owner", "memory.ExperienceHistory.run": "run",
    "memory.CardSnapshot.run": "run",
    # The companion's connection (O4; the field comes with issue 28 point 1's companion settings):
    # by its name, never its key or address.
    "memory.Profile.model_connection": "connection",
}
# Fields of those models an export leaves out, and why (the model test checks every field too).
NOT_EXPORTED_FIELDS = {
    "id": "a database key: rows are named by their own ids (mid, hid, eid, rid, keys, positions)",
    "memory.Profile.user": "the account: an import goes into the importing one",
    "memory.Profile.turn_until": "operational: the lease of a turn in flight",
    "memory.ExperienceSource.experience": "the export nests sources in their experience (source_mids)",
    "memory.ExperienceSource.mid": "written as experiences[].source_mids, in order",
    "memory.ExperienceSource.message": "derived: the line of the mid, found again on import",
    "memory.ExperienceSource.position": "the order of experiences[].source_mids",
    "memory.ExperienceHistory.experience": "the export nests history in its experience",
    "memory.Relation.from_highlight": "derived from from_id on import",
    "memory.Relation.from_experience": "derived from from_id on import",
    "memory.Relation.to_highlight": "derived from to_id on import",
    "memory.Relation.to_experience": "derived from to_id on import",
}
# Every other model, and why its rows are not in an export (issue 28 point 4: a test fails on a
# model in neither list, so a kind added later is not forgotten).
NOT_EXPORTED = {
    # Derived, and rebuilt by the import: the recall index is written with each imported batch
    # (memory.recall.index.index_messages), the vectors by the housekeeping backfill.
    "memory.RecallDocument": "derived: the recall index, rebuilt as the import writes each batch",
    "memory.RecallTerm": "derived: the recall index's term counts, rebuilt with it",
    "memory.RecallStats": "derived: the recall index's totals, rebuilt with it",
    "memory.RecallVector": "derived: embeddings, rebuilt by the housekeeping backfill",
    # Operational: the progress of a job, not memory (the runs it made are exported).
    "memory.CatchUp": "operational: a catch-up's progress; its evolution runs are exported",
    "django_tasks_database.DBTaskResult": "operational: background task results",
    # Secrets, and the account itself (an import goes into an account that exists).
    "auth.User": "secret: the account and its password hash; an import goes into an existing account",
    "sessions.Session": "secret: sign-in sessions",
    "memory.AccountSession": "secret: sign-in sessions (device, address)",
    "memory.Invitation": "secret: invitation tokens (their digests)",
    "memory.Connection": "secret and site-wide: model connections and their API keys",
    # Security and audit logs of the site, not a person's memory.
    "axes.AccessAttempt": "operational: login throttling",
    "axes.AccessAttemptExpiration": "operational: login throttling",
    "axes.AccessFailureLog": "operational: login throttling",
    "axes.AccessLog": "operational: login audit",
    "admin.LogEntry": "operational: the admin's audit log",
    # Site-wide: no person's data.
    "memory.ModelChoice": "site-wide: the default models (a companion's own model is exported)",
    "memory.SiteSwitch": "site-wide: switches such as open sign-up",
    "auth.Group": "site-wide: permission groups",
    "auth.Permission": "site-wide: permissions",
    "auth.Group_permissions": "site-wide: permissions",
    "auth.User_groups": "site-wide: permission groups of accounts",
    "auth.User_user_permissions": "site-wide: permissions of accounts",
    "contenttypes.ContentType": "site-wide: Django's model registry",
}


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
    "local_hour", "period", "tz", "source_id", "sync_status", "deleted_at", "reviewed_at", "legacy_key",
    "content_hash", "legacy_extra",
)
SLICE_FIELDS = ("key", "started_at", "last_message_at", "ended_at", "close_reason", "tz", "injected_card")
HIGHLIGHT_FIELDS = ("hid", "mid", "content", "source", "created_at", "deleted_at", "reviewed_at", "flagged",
                    "legacy_key", "legacy_extra")
EXPERIENCE_FIELDS = ("eid", "title", "content", "status", "time_certainty", "event_time", "event_time_text",
                     "recorded_at", "invalid_at", "updated_at", "deleted_at", "reviewed_at", "flagged", "legacy_key",
                     "legacy_extra")
HISTORY_FIELDS = ("actor", "action", "before", "after", "reason", "created_at")
RELATION_FIELDS = ("rid", "type", "from_id", "to_id", "created_at", "deleted_at", "reviewed_at", "flagged",
                   "legacy_key", "legacy_extra")
FRAGMENT_FIELDS = ("key", "role", "content", "ts", "day_key", "hour", "period", "disposition", "fingerprint",
                   "legacy_extra")
META_FIELDS = ("key", "value", "expiration", "metadata")
TOMBSTONE_FIELDS = ("kind", "object_id", "deleted_at", "expires_at", "content_hash", "created_at", "legacy_key",
                    "legacy_extra")
CARD_FIELDS = ("text", "format", "version", "updated_at")
# Companion settings (issue 17 point 8, H2); the avatar is written apart (its file).
SETTINGS_FIELDS = ("model", "temperature", "quiet_from", "quiet_until", "tz", "created_at")
COMPANION_CARD_FIELDS = ("identity", "spec", "data", "book", "persona_built", "source_name", "imported_at")
LORE_FIELDS = ("position", "name", "keys", "secondary_keys", "content", "enabled", "constant", "selective",
               "case_sensitive", "insertion_order", "priority", "extra")
RUN_FIELDS = ("trigger", "status", "skip_reason", "summary", "diff", "steps", "model_name", "error", "attempts",
              "card_before", "card_after", "created_at", "started_at", "finished_at")
SLICE_LOG_FIELDS = ("kind", "summary", "created_at")
PROACTIVE_FIELDS = ("day", "reason", "subject", "created_at")
# A stored image's metadata without its storage paths (the file is a zip member instead).
IMAGE_META = ("content_type", "size", "width", "height", "sha256", "name")
# The pieces of a prompt trace that name rows (U4), by the ids an export keeps.
TRACE_REFS = ("recalled", "highlights", "experiences", "lore")


@dataclass
class Export:
    """An export: its JSON, and the image files that go beside it in a zip (member -> the
    storage path it is read from); no files, and the export is the JSON alone."""

    data: dict
    files: dict[str, str] = field(default_factory=dict)


def run_ref(n: int) -> str:
    """How an export names its n-th evolution run (a run has no id of its own but its key)."""
    return f"run-{n}"


def _image(meta, paths: list[str], member: str, files: dict) -> dict | None:
    """A stored image's metadata as exported: its storage paths replaced by the zip member that
    holds the file (`file`), when the file is there; legacy records (no file) as they are."""
    if not isinstance(meta, dict):
        return meta
    if not paths or not default_storage.exists(paths[0]):
        return {k: v for k, v in meta.items() if k not in ("path", "thumb")} if paths else meta
    files[member] = paths[0]
    return {**{k: meta[k] for k in IMAGE_META if k in meta}, "file": member}


def connection_name(profile: Profile) -> str | None:
    """The name of the connection a companion's model was picked from (O4), None when it has
    none (the server's default) or the connection has no name: never its key or its address
    (an address may carry credentials)."""
    connection = getattr(profile, "model_connection", None)
    return connection.name or None if connection is not None else None


def _ext(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def export_profile(profile: Profile, files: dict | None = None) -> dict:
    """Everything of one profile as plain JSON-able data; the image files it names are added
    to `files` (zip member -> storage path)."""
    files = {} if files is None else files
    messages = list(Message.objects.filter(profile=profile).select_related("slice").order_by("created_at", "id"))
    mids = {m.pk: m.mid for m in messages}
    highlights = list(Highlight.objects.filter(profile=profile))
    experiences = list(Experience.objects.filter(profile=profile).prefetch_related(
        Prefetch("source_links", queryset=ExperienceSource.objects.order_by("position")),
        Prefetch("history", queryset=ExperienceHistory.objects.order_by("created_at", "id")),
    ))
    lore = list(LoreEntry.objects.filter(profile=profile).order_by("position"))
    runs = {r.pk: run_ref(n) for n, r in enumerate(
        EvolutionRun.objects.filter(profile=profile).order_by("created_at", "id").only("pk"))}
    names = {"recalled": mids, "highlights": {h.pk: h.hid for h in highlights},
             "experiences": {e.pk: e.eid for e in experiences}, "lore": {e.pk: e.position for e in lore}}
    card = Card.objects.filter(profile=profile).first()
    companion_card = CompanionCard.objects.filter(profile=profile).first()
    avatar_files = avatar_paths(profile.pk, profile.avatar)
    avatar = [p for p in avatar_files if ".thumb" not in p]
    return {
        "key": profile.key,
        "name": profile.name,
        "persona": profile.persona,
        "language": profile.language,
        "proactive_enabled": profile.proactive_enabled,
        "settings": {
            **_row(profile, SETTINGS_FIELDS),
            "connection": connection_name(profile),
            "avatar": _image(profile.avatar, avatar, f"avatars/{profile.key}.{_ext(avatar[0])}" if avatar else "",
                             files),
        },
        "companion_card": _row(companion_card, COMPANION_CARD_FIELDS) if companion_card else None,
        "lore_entries": [_row(e, LORE_FIELDS) for e in lore],
        "slices": [_row(s, SLICE_FIELDS) for s in Slice.objects.filter(profile=profile).order_by("started_at")],
        "slice_log": [
            {"slice": e.slice.key, **_row(e, SLICE_LOG_FIELDS), "data": _log_data(e.data, runs)}
            for e in SliceLogEntry.objects.filter(slice__profile=profile).select_related("slice")
            .order_by("created_at", "id")
        ],
        "highlights": [_row(h, HIGHLIGHT_FIELDS) for h in highlights],
        "evolution_runs": [
            {"ref": runs[r.pk], "slice": r.slice.key if r.slice_id else None, **_row(r, RUN_FIELDS)}
            for r in EvolutionRun.objects.filter(profile=profile).select_related("slice").order_by("created_at", "id")
        ],
        "experiences": [
            {
                **_row(e, EXPERIENCE_FIELDS),
                "source_mids": [s.mid for s in e.source_links.all()],
                "history": [
                    {**_row(h, HISTORY_FIELDS), "run": runs.get(h.run_id),
                     # Who acted, as "the account's owner" or not: another person's name never appears.
                     "by_owner": h.actor_user_id is not None and h.actor_user_id == profile.user_id}
                    for h in e.history.all()
                ],
            }
            for e in experiences
        ],
        "relations": [_row(r, RELATION_FIELDS) for r in Relation.objects.filter(profile=profile)],
        "legacy_meta": [_row(m, META_FIELDS) for m in LegacyMeta.objects.filter(profile=profile)],
        "card": _row(card, CARD_FIELDS) if card else None,
        "card_snapshots": [
            {"slice": s.slice.key, "text": s.text, "card_version": s.card_version, "created_at": _iso(s.created_at),
             "run": runs.get(s.run_id)}
            for s in CardSnapshot.objects.filter(profile=profile).select_related("slice")
        ],
        "tombstones": [_row(t, TOMBSTONE_FIELDS) for t in Tombstone.objects.filter(profile=profile)],
        "favourites": [
            {"mid": f.message.mid, "excerpt": f.excerpt, "hid": f.highlight.hid if f.highlight else None,
             "created_at": _iso(f.created_at)}
            for f in Favourite.objects.filter(profile=profile).select_related("message", "highlight").order_by("created_at", "id")
        ],
        "proactive_sends": [
            {**_row(s, PROACTIVE_FIELDS), "day": s.day.isoformat(), "mid": mids.get(s.message_id)}
            for s in ProactiveSend.objects.filter(profile=profile).order_by("created_at", "id")
        ],
        # The long lists last: an import's pass for a short list ends where that list does
        # (memory.interop.json_stream, `ExportFile.records`), not at the end of the lines.
        "legacy_fragments": [
            {**_row(f, FRAGMENT_FIELDS), "mid": f.message.mid if f.message else None}
            for f in LegacyFragment.objects.filter(profile=profile).select_related("message").iterator(2000)
        ],
        "messages": [_message(m, profile.key, mids, names, files) for m in messages],
    }


def _message(m: Message, key: str, mids: dict, names: dict, files: dict) -> dict:
    paths = attachment_paths(m)
    member = f"images/{key}/{m.mid}.{_ext(paths[0])}" if paths else ""
    return {
        **_row(m, MESSAGE_FIELDS), "slice": m.slice.key, "fragment_keys": [],
        "attachment": _image(m.attachment, paths, member, files),
        "reply_of": mids.get(m.reply_of_id),
        "prompt_trace": _trace(m.prompt_trace, names),
    }


def _trace(trace, names: dict):
    """A prompt trace with the rows it names by their export ids (mid, hid, eid, lore position),
    not database keys; a row that is gone is left out."""
    if not isinstance(trace, dict):
        return trace
    out = dict(trace)
    for part in TRACE_REFS:
        if isinstance(trace.get(part), list):
            out[part] = [names[part][pk] for pk in trace[part] if pk in names[part]]
    return out


def _log_data(data, runs: dict):
    """A slice log entry's data with its run named as the export names it (not a database key)."""
    if isinstance(data, dict) and "run_id" in data:
        return {**data, "run_id": runs.get(data["run_id"])}
    return data


def export_full(*, profiles: Iterable[Profile], exported_at: datetime | None = None) -> Export:
    """The full export of these profiles in our own versioned format (X1), with its files."""
    files: dict[str, str] = {}
    data = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": (exported_at or timezone.now()).isoformat(),
        "profiles": [export_profile(p, files) for p in profiles],
    }
    return Export(data=data, files=files)


def export_json(*, profiles: Iterable[Profile]) -> dict:
    """The export's JSON alone (its image files named, not included)."""
    return export_full(profiles=profiles).data


def json_bytes(data: dict) -> bytes:
    return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def write_export(export: Export, out) -> str:
    """Write the export to a binary file: the JSON alone ("json"), or, when it has image
    files, a zip of `export.json` and the files ("zip"); which one it wrote. The zip's member
    times are the export's time, so the same data gives the same bytes."""
    if not export.files:
        out.write(json_bytes(export.data))
        return "json"
    stamp = datetime.fromisoformat(export.data["exported_at"]).astimezone(UTC).timetuple()[:6]
    stamp = max(stamp, (1980, 1, 1, 0, 0, 0))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo(JSON_MEMBER, stamp), json_bytes(export.data), zipfile.ZIP_DEFLATED)
        for member, path in export.files.items():
            with default_storage.open(path, "rb") as fh:
                archive.writestr(zipfile.ZipInfo(member, stamp), fh.read(), zipfile.ZIP_DEFLATED)
    return "zip"


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


__all__ = ["EXPORTED", "NOT_EXPORTED", "Export", "export_full", "json_bytes", "export_json", "export_kv",
           "profiles_for", "write_export", "write_kv"]
