"""Deleting for good (SPEC D1-D5): hide, hard delete with tombstones, purge, prune.

Every hard delete runs in one transaction that also tombstones each removed record and
makes the recall index forget the message, so deleted text can never be recalled (D3).
"""

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.core.files.storage import default_storage
from django.db import models, transaction
from django.utils import timezone

from memory.images import attachment_paths
from memory.models import (
    CardSnapshot,
    EvolutionRun,
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Favourite,
    Highlight,
    LegacyFragment,
    Message,
    Profile,
    Relation,
    Slice,
    Tombstone,
)
from memory.models.deletion import tombstone_expiry
from memory.recall.index import forget_profile, index_messages, remove_messages

log = logging.getLogger(__name__)

Kind = Tombstone.Kind


class HasRefs(Exception):
    """D1: the message is referenced; `refs` lists what a forced delete would take with it."""

    code = "has_refs"

    def __init__(self, refs: list[dict]):
        self.refs = refs
        super().__init__(f"has_refs: {len(refs)} record(s) reference this message")


class MessageNotFound(Exception):
    """No such message in this profile, and no tombstone for it either."""

    code = "not_found"

    def __init__(self, mid: str):
        self.mid = mid
        super().__init__(f"message {mid} not found in this profile")


@dataclass
class Deletion:
    """What one delete did: `status` is deleted, already_gone, hidden or already_hidden."""

    status: str
    mid: str
    tombstones: list[tuple[str, str]] = field(default_factory=list)  # (kind, object_id)
    uncited: list[str] = field(default_factory=list)  # eids that only lost this citation

    @property
    def already_gone(self) -> bool:
        return self.status == "already_gone"

    def as_dict(self) -> dict:
        return {
            "ok": True,
            "status": self.status,
            "mid": self.mid,
            "already_gone": self.already_gone,
            "tombstones": [{"kind": k, "id": i} for k, i in self.tombstones],
            "uncited_experiences": self.uncited,
        }


# --- hide (soft delete) ---------------------------------------------------------------


def hide_message(message: Message, *, at: datetime | None = None) -> bool:
    """Flag the message deleted and remove it from the index in one transaction; False if already hidden."""
    if message.deleted_at is not None:
        return False
    at = at or timezone.now()
    with transaction.atomic():
        Message.objects.filter(pk=message.pk).update(deleted_at=at)
        remove_messages([message.pk])
    message.deleted_at = at
    return True


def unhide_message(message: Message) -> bool:
    """Clear the flag and index the message again; False if it was not hidden."""
    if message.deleted_at is None:
        return False
    with transaction.atomic():
        Message.objects.filter(pk=message.pk).update(deleted_at=None)
        message.deleted_at = None
        index_messages([message])
    return True


# --- hard delete of a message and its dependants (D1, D2) ------------------------------


@dataclass
class _Plan:
    highlights: list[Highlight]
    favourites: list[Favourite]
    experiences_deleted: list[Experience]  # this message is their only source
    experiences_uncited: list[Experience]  # they keep their other sources
    relations: list[Relation]

    def refs(self) -> list[dict]:
        return (
            [{"kind": "hl", "id": h.hid, "text": h.content[:120]} for h in self.highlights]
            + [{"kind": "fav", "id": str(f.pk), "text": (f.excerpt or "(whole message)")[:120]} for f in self.favourites]
            + [{"kind": "exp", "id": e.eid, "text": e.title, "effect": "deleted"} for e in self.experiences_deleted]
            + [{"kind": "exp", "id": e.eid, "text": e.title, "effect": "uncited"} for e in self.experiences_uncited]
            + [{"kind": "rel", "id": r.rid, "text": f"{r.from_id} {r.type} {r.to_id}"} for r in self.relations]
        )


def _plan(message: Message) -> _Plan:
    highlights = list(Highlight.objects.filter(message=message))
    favourites = list(Favourite.objects.filter(message=message))
    cites = models.Q(source_links__message=message) | models.Q(source_links__mid=message.mid)
    experiences = list(Experience.objects.filter(cites, profile=message.profile_id).distinct())
    others = set(
        ExperienceSource.objects.filter(experience__in=experiences)
        .exclude(mid=message.mid)
        .exclude(message=message)
        .values_list("experience_id", flat=True)
    )
    deleted = [e for e in experiences if e.pk not in others]
    relations = list(Relation.objects.touching_any(highlights=highlights, experiences=deleted))
    return _Plan(highlights, favourites, deleted, [e for e in experiences if e.pk in others], relations)


def message_refs(message: Message) -> list[dict]:
    """Everything a forced hard delete of `message` would delete or change (D1)."""
    return _plan(message).refs()


def hard_delete_message(message: Message, *, force: bool = False) -> Deletion:
    """Delete the message for good, cascading when forced, leaving tombstones (D2)."""
    with transaction.atomic():
        locked = Message.objects.select_for_update().filter(pk=message.pk).first()
        if locked is None:
            return Deletion("already_gone", message.mid)
        plan = _plan(locked)
        if plan.highlights or plan.favourites or plan.experiences_deleted or plan.experiences_uncited:
            if not force:
                raise HasRefs(plan.refs())
        now = timezone.now()
        tombs: list[Tombstone] = []
        for experience in plan.experiences_uncited:
            before = experience.snapshot()
            experience.source_links.filter(models.Q(message=locked) | models.Q(mid=locked.mid)).delete()
            experience.save(update_fields=["updated_at"])
            experience.record(
                action="source_removed",
                before=before,
                actor=ExperienceHistory.Actor.SYSTEM,
                reason=f"source message {locked.mid} was deleted for good",
            )
        tombs += _delete_relations(plan.relations, now)
        tombs += _delete_experiences(plan.experiences_deleted, now)
        Favourite.objects.filter(pk__in=[f.pk for f in plan.favourites]).delete()
        tombs += _delete_highlights(plan.highlights, now)
        tombs.append(_tomb(locked.profile_id, Kind.MESSAGE, locked.mid, now, locked.content_hash, locked.created_at))
        tombs += _delete_fragments(locked, now)
        remove_messages([locked.pk])
        _forget_attachment_on_commit(locked)
        locked.delete()
        _write_tombstones(tombs)
    return Deletion(
        "deleted",
        locked.mid,
        tombstones=[(t.kind, t.object_id) for t in tombs],
        uncited=[e.eid for e in plan.experiences_uncited],
    )


def delete_message(*, profile: Profile, mid: str, hard: bool = False, force: bool = False) -> Deletion:
    """The one entry point by mid (views, API, command): hide, or delete for good (D1, D2)."""
    message = Message.objects.filter(profile=profile, mid=mid).first()
    if message is None:
        if Tombstone.objects.filter(profile=profile, kind=Kind.MESSAGE, object_id=mid).exists():
            return Deletion("already_gone", mid)
        raise MessageNotFound(mid)
    if hard:
        return hard_delete_message(message, force=force)
    return Deletion("hidden" if hide_message(message) else "already_hidden", mid)


def _delete_fragments(message: Message, now: datetime) -> list[Tombstone]:
    """The raw legacy fragments of the line go too, or the old P0-2 leak would come back
    through export; each leaves a `mem` tombstone under its full legacy key."""
    fragments = list(LegacyFragment.objects.filter(message=message))
    LegacyFragment.objects.filter(pk__in=[f.pk for f in fragments]).delete()
    return [_tomb(message.profile_id, Kind.FRAGMENT, f.key, now, message.content_hash) for f in fragments]


def _tomb(profile_id, kind, object_id, now, content_hash="", created_at=None) -> Tombstone:
    return Tombstone(
        profile_id=profile_id,
        kind=kind,
        object_id=object_id,
        deleted_at=now,
        expires_at=tombstone_expiry(now),
        content_hash=content_hash,
        created_at=created_at,
    )


def _write_tombstones(tombs: list[Tombstone]) -> None:
    # A record deleted twice (re-created after an earlier delete) refreshes its tombstone.
    Tombstone.objects.bulk_create(
        tombs,
        update_conflicts=True,
        unique_fields=["profile", "kind", "object_id"],
        update_fields=["deleted_at", "expires_at", "content_hash", "created_at"],
    )


def _delete_relations(relations, now) -> list[Tombstone]:
    tombs = [_tomb(r.profile_id, Kind.RELATION, r.rid, now, created_at=r.created_at) for r in relations]
    Relation.objects.filter(pk__in=[r.pk for r in relations]).delete()
    return tombs


def _delete_experiences(experiences, now) -> list[Tombstone]:
    tombs = [_tomb(e.profile_id, Kind.EXPERIENCE, e.eid, now, created_at=e.recorded_at) for e in experiences]
    Experience.objects.filter(pk__in=[e.pk for e in experiences]).delete()
    return tombs


def _delete_highlights(highlights, now) -> list[Tombstone]:
    tombs = [_tomb(h.profile_id, Kind.HIGHLIGHT, h.hid, now, created_at=h.created_at) for h in highlights]
    Highlight.objects.filter(pk__in=[h.pk for h in highlights]).delete()
    return tombs


def _forget_attachment_on_commit(message: Message) -> None:
    """A7 hook: an attachment stored through the storage API (the file and its thumbnail) goes
    with its message, after commit."""
    paths = attachment_paths(message)
    if not paths:
        return

    def remove():
        for path in paths:
            try:
                default_storage.delete(path)
            except OSError:
                log.warning("could not delete attachment %s of message %s", path, message.mid)

    transaction.on_commit(remove)


# --- hard delete of a highlight, experience or relation on its own (D4 purge) ---------


def purge_highlight(highlight: Highlight) -> list[tuple[str, str]]:
    """Delete a highlight for good with its relations (C7, D2); its message stays (C1)."""
    with transaction.atomic():
        now = timezone.now()
        tombs = _delete_relations(list(Relation.objects.touching(highlight)), now)
        Favourite.objects.filter(highlight=highlight).update(highlight=None)
        tombs += _delete_highlights([highlight], now)
        _write_tombstones(tombs)
    return [(t.kind, t.object_id) for t in tombs]


def purge_experience(experience: Experience) -> list[tuple[str, str]]:
    """Delete an experience for good with its relations and history, leaving tombstones."""
    with transaction.atomic():
        now = timezone.now()
        tombs = _delete_relations(list(Relation.objects.touching(experience)), now)
        tombs += _delete_experiences([experience], now)
        _write_tombstones(tombs)
    return [(t.kind, t.object_id) for t in tombs]


def purge_relation(relation: Relation) -> list[tuple[str, str]]:
    with transaction.atomic():
        tombs = _delete_relations([relation], timezone.now())
        _write_tombstones(tombs)
    return [(t.kind, t.object_id) for t in tombs]


PURGEABLE = {
    Kind.RELATION: (Relation, lambda r: purge_relation(r)),
    Kind.HIGHLIGHT: (Highlight, lambda h: purge_highlight(h)),
    Kind.EXPERIENCE: (Experience, lambda e: purge_experience(e)),
    Kind.MESSAGE: (Message, lambda m: hard_delete_message(m, force=True).tombstones),
}
# Relations first, messages last: a message's cascade may already have taken the others.
PURGE_ORDER = [Kind.RELATION, Kind.HIGHLIGHT, Kind.EXPERIENCE, Kind.MESSAGE]


def kind_of(model) -> str:
    return next(kind for kind, (m, _) in PURGEABLE.items() if m is model)


@dataclass
class PurgeReport:
    """Rows selected per kind, and tombstones written per kind (empty on a dry run)."""

    selected: Counter = field(default_factory=Counter)
    tombstones: Counter = field(default_factory=Counter)
    dry_run: bool = False

    def rows(self) -> list[tuple[str, int, int]]:
        return [(str(Kind(k).label), self.selected[k], self.tombstones[k]) for k in PURGE_ORDER]


def purge_records(queryset, *, batch: int = 200, dry_run: bool = False,
                  progress: Callable[[str, int, int], None] | None = None) -> PurgeReport:
    """Hard-delete the soft-deleted rows of `queryset` in batches, each with tombstones (D4)."""
    kind = kind_of(queryset.model)
    _, purge_one = PURGEABLE[kind]
    ids = list(queryset.filter(deleted_at__isnull=False).order_by("pk").values_list("pk", flat=True))
    report = PurgeReport(dry_run=dry_run)
    report.selected[kind] = len(ids)
    if dry_run:
        return report
    done = 0
    for start in range(0, len(ids), batch):
        with transaction.atomic():
            for record in queryset.model.objects.filter(pk__in=ids[start : start + batch]):
                for tomb_kind, _ in purge_one(record):
                    report.tombstones[tomb_kind] += 1
        done = min(start + batch, len(ids))
        if progress:
            progress(str(Kind(kind).label), done, len(ids))
    return report


def purge_soft_deleted(*, profile: Profile | None = None, before: datetime | None = None,
                       batch: int = 200, dry_run: bool = False,
                       progress: Callable[[str, int, int], None] | None = None) -> PurgeReport:
    """D4: every soft-deleted message/highlight/experience/relation (of a profile, deleted before a date)."""
    report = PurgeReport(dry_run=dry_run)
    for kind in PURGE_ORDER:
        model, _ = PURGEABLE[kind]
        qs = model.objects.filter(deleted_at__isnull=False)
        if profile is not None:
            qs = qs.filter(profile=profile)
        if before is not None:
            qs = qs.filter(deleted_at__lt=before)
        part = purge_records(qs, batch=batch, dry_run=dry_run, progress=progress)
        report.selected.update(part.selected)
        report.tombstones.update(part.tombstones)
    return report


def restore_records(queryset) -> int:
    """D4 "keep": un-flag soft-deleted rows (messages go back into the index); returns how many."""
    restored = 0
    for record in queryset.filter(deleted_at__isnull=False):
        if isinstance(record, Message):
            restored += unhide_message(record)
        else:
            restored += bool(record.restore())
    return restored


def prune_tombstones(*, dry_run: bool = False, now: datetime | None = None) -> int:
    """D5: remove expired tombstones; returns how many were (or would be) removed."""
    expired = Tombstone.objects.expired(now)
    if dry_run:
        return expired.count()
    return expired.delete()[0]


# --- a whole profile (P2: the user's right to remove a companion and all of it) ---------


def profile_contents(profile: Profile) -> dict[str, int]:
    """What deleting `profile` removes, counted per kind (shown before the user confirms)."""
    return {
        "messages": Message.objects.filter(profile=profile).count(),
        "slices": Slice.objects.filter(profile=profile).count(),
        "highlights": Highlight.objects.filter(profile=profile).count(),
        "favourites": Favourite.objects.filter(profile=profile).count(),
        "experiences": Experience.objects.filter(profile=profile).count(),
        "relations": Relation.objects.filter(profile=profile).count(),
        "card_snapshots": CardSnapshot.objects.filter(profile=profile).count(),
        "evolution_runs": EvolutionRun.objects.filter(profile=profile).count(),
        "legacy_fragments": LegacyFragment.objects.filter(profile=profile).count(),
        "tombstones": Tombstone.objects.filter(profile=profile).count(),
    }


def delete_profile(profile: Profile) -> dict[str, int]:
    """Delete a profile and everything of it for good: rows, recall index, attachment files.

    No tombstones are left: they belong to the profile too, and the user asked for all of it
    to go. Returns the counts of `profile_contents` as they were."""
    with transaction.atomic():
        counts = profile_contents(profile)
        paths = [
            a["path"]
            for a in Message.objects.filter(profile=profile, attachment__isnull=False).values_list(
                "attachment", flat=True
            )
            if isinstance(a, dict) and a.get("path")
        ]
        forget_profile(profile.pk)
        profile.delete()

        def remove_files():
            for path in paths:
                try:
                    default_storage.delete(path)
                except OSError:
                    log.warning("could not delete attachment %s of a deleted profile", path)

        if paths:
            transaction.on_commit(remove_files)
    return counts
