"""Deleting for good (SPEC D1-D7): hide, hard delete with tombstones, purge, prune.

Every hard delete runs in one transaction that also tombstones each removed record and
makes the recall index forget the message, so deleted text can never be recalled (D3), and
takes the deleted words out of every derived layer (D6): quoting replies (deleted, or kept
with "[deleted]"), card lines (quoting ones always, citing ones when the person chose them,
recorded as a `forget` run, D7), snapshots, runs, logs, experiences, legacy rows. Derived
rows of a message are removed in one place, `remove_derived_rows`. After the commit the
database files are made to forget too (`reclaim_space`).
"""

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from datetime import datetime

from django.core.files.storage import default_storage
from django.db import connections, models, transaction
from django.utils import timezone

from memory.card import detect_format, render
from memory.card.lines import CardLine, card_lines, without_lines
from memory.card.store import line_diff, parse_or_empty, refresh_injected_card
from memory.hashing import content_hash
from memory.images import attachment_paths, avatar_paths
from memory.models import (
    Card,
    CardSnapshot,
    EvolutionRun,
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Favourite,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    Message,
    ProactiveSend,
    Profile,
    Relation,
    Slice,
    SliceLogEntry,
    Tombstone,
)
from memory.models.deletion import tombstone_expiry
from memory.quotes import Quotes
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
    replies_deleted: list[str] = field(default_factory=list)  # mids of replies that quoted it
    replies_kept: list[str] = field(default_factory=list)  # kept, the quoted words "[deleted]"
    card_lines_removed: list[str] = field(default_factory=list)  # the lines as they read (scrubbed)
    run_id: int | None = None  # the "forget" run that recorded the card change (D7)

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
            "replies_deleted": self.replies_deleted,
            "replies_kept": self.replies_kept,
            "card_lines_removed": self.card_lines_removed,
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
    replies: list[Message] = field(default_factory=list)  # companion lines quoting it (D6)
    card_lines: list[tuple[CardLine, bool]] = field(default_factory=list)  # (line, quotes it) D7

    def refs(self) -> list[dict]:
        return (
            [{"kind": "hl", "id": h.hid, "text": h.content[:120]} for h in self.highlights]
            + [{"kind": "fav", "id": str(f.pk), "text": (f.excerpt or "(whole message)")[:120]} for f in self.favourites]
            + [{"kind": "exp", "id": e.eid, "text": e.title, "effect": "deleted"} for e in self.experiences_deleted]
            + [{"kind": "exp", "id": e.eid, "text": e.title, "effect": "uncited"} for e in self.experiences_uncited]
            + [{"kind": "rel", "id": r.rid, "text": f"{r.from_id} {r.type} {r.to_id}"} for r in self.relations]
            + [{"kind": "reply", "id": m.mid, "text": m.content[:200]} for m in self.replies]
            + [
                {"kind": "card", "id": line.key, "text": line.words, "section": line.section,
                 "effect": "quotes" if quotes else "cites"}
                for line, quotes in self.card_lines
            ]
        )

    @property
    def anything(self) -> bool:
        return bool(
            self.highlights or self.favourites or self.experiences_deleted
            or self.experiences_uncited or self.replies or self.card_lines
        )


def _cascade_plan(message: Message) -> _Plan:
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


def _plan(message: Message) -> _Plan:
    plan = _cascade_plan(message)
    quotes = Quotes(_persons_words([message]), common=_said_elsewhere(message.profile_id, [message.pk]))
    plan.replies = quoting_replies(message.profile_id, quotes, exclude=[message.pk])
    plan.card_lines = citing_card_lines(message.profile_id, {message.slice.ref}, quotes)
    return plan


def _said_elsewhere(profile_id: int, gone_ids: list[int]) -> Callable[[str], bool]:
    """A run the person also said in a line that stays is their everyday wording, not a quote
    of the deleted line: it is neither looked for in replies and cards nor blanked."""
    others = Message.objects.filter(profile_id=profile_id, speaker=Message.Speaker.USER).exclude(pk__in=gone_ids)
    return lambda run: others.filter(content__contains=run).exists()


def _persons_words(messages) -> list[str]:
    return [m.content for m in messages if m.speaker == Message.Speaker.USER]


def quoting_replies(profile_id: int, quotes: Quotes, *, exclude=()) -> list[Message]:
    """The companion's lines that quote a deleted text verbatim (D6)."""
    if not quotes:
        return []
    qs = Message.objects.filter(profile_id=profile_id, speaker=Message.Speaker.ASSISTANT).exclude(pk__in=exclude)
    return [m for m in _candidates(qs, ["content", "raw_content"], quotes) if quotes.found(m.content) or quotes.found(m.raw_content)]


def citing_card_lines(profile_id: int, refs: set[str], quotes: Quotes) -> list[tuple[CardLine, bool]]:
    """The live card's lines that cite one of `refs` (slices) or quote a deleted text (D7)."""
    row = Card.objects.filter(profile_id=profile_id).first()
    if row is None or detect_format(row.text) != "v5":
        return []
    out = []
    for line in card_lines(parse_or_empty(row.text)):
        quoted = quotes.found(line.text)
        if quoted or refs.intersection(line.refs):
            out.append((line, quoted))
    return out


def message_refs(message: Message) -> list[dict]:
    """Everything a forced hard delete of `message` would delete or change (D1, D6, D7)."""
    return _plan(message).refs()


def hard_delete_message(message: Message, *, force: bool = False, keep_replies: bool = False,
                        drop_lines: Iterable[str] = ()) -> Deletion:
    """Delete the message for good, cascading when forced, leaving tombstones (D2), and take
    its words out of every derived place (D6).

    The companion's replies quoting it go too, unless `keep_replies` (then the quoted words
    read "[deleted]"). Card lines quoting it always go; card lines citing its conversation go
    when their key is in `drop_lines` (the person's choice, D7)."""
    with transaction.atomic():
        locked = Message.objects.select_for_update().filter(pk=message.pk).select_related("slice").first()
        if locked is None:
            return Deletion("already_gone", message.mid)
        plan = _plan(locked)
        if plan.anything and not force:
            raise HasRefs(plan.refs())
        result = _forget_messages(
            locked.profile_id, [(locked, plan)], replies=plan.replies, keep_replies=keep_replies,
            drop_lines=set(drop_lines), anchor=locked.mid,
        )
        result.mid = locked.mid
    _reclaim_on_commit()
    return result


def delete_message(*, profile: Profile, mid: str, hard: bool = False, force: bool = False,
                   keep_replies: bool = False, drop_lines: Iterable[str] = ()) -> Deletion:
    """The one entry point by mid (views, API, command): hide, or delete for good (D1, D2, D6)."""
    message = Message.objects.filter(profile=profile, mid=mid).first()
    if message is None:
        if Tombstone.objects.filter(profile=profile, kind=Kind.MESSAGE, object_id=mid).exists():
            return Deletion("already_gone", mid)
        raise MessageNotFound(mid)
    if hard:
        return hard_delete_message(message, force=force, keep_replies=keep_replies, drop_lines=drop_lines)
    return Deletion("hidden" if hide_message(message) else "already_hidden", mid)


def slice_refs(slice_: Slice) -> list[dict]:
    """What deleting the whole conversation takes with it or changes (D6, D7)."""
    return _slice_plan(slice_).refs()


def _slice_plan(slice_: Slice) -> _Plan:
    messages = list(Message.objects.filter(slice=slice_))
    quotes = Quotes(_persons_words(messages), common=_said_elsewhere(slice_.profile_id, [m.pk for m in messages]))
    plan = _Plan([], [], [], [], [])
    for m in messages:
        part = _cascade_plan(m)
        plan.highlights += part.highlights
        plan.favourites += part.favourites
        plan.experiences_deleted += [e for e in part.experiences_deleted if e not in plan.experiences_deleted]
        plan.experiences_uncited += [e for e in part.experiences_uncited if e not in plan.experiences_uncited]
        plan.relations += [r for r in part.relations if r not in plan.relations]
    plan.replies = quoting_replies(slice_.profile_id, quotes, exclude=[m.pk for m in messages])
    plan.card_lines = citing_card_lines(slice_.profile_id, {slice_.ref}, quotes)
    return plan


def delete_slice(slice_: Slice, *, keep_replies: bool = False, drop_lines: Iterable[str] = ()) -> Deletion:
    """Delete a whole conversation for good (D6): every line with its cascade and tombstones,
    its snapshot and cognitive log, its words everywhere else; the slice row goes last."""
    with transaction.atomic():
        messages = list(Message.objects.select_for_update().filter(slice=slice_).order_by("created_at", "id"))
        plan = _slice_plan(slice_)
        # Each line's own cascade (an experience citing two lines of this slice goes once).
        pairs = [(m, _cascade_plan(m)) for m in messages]
        result = _forget_messages(
            slice_.profile_id, pairs, replies=plan.replies, keep_replies=keep_replies,
            drop_lines=set(drop_lines), anchor=slice_.key, cited={slice_.ref},
        )
        result.mid = slice_.key
        # Runs keep their (scrubbed) record; the slice's snapshot and log go with the row.
        Slice.objects.filter(pk=slice_.pk).delete()
    _reclaim_on_commit()
    return result


def _forget_messages(profile_id: int, pairs: list[tuple[Message, _Plan]], *, replies: list[Message],
                     keep_replies: bool, drop_lines: set[str], anchor: str,
                     cited: set[str] = frozenset()) -> Deletion:
    """The body of every hard delete: the cascade of each message, the quoting replies, and the
    words of all of them out of every derived layer. Runs inside the caller's transaction.
    Card lines citing the messages' conversations, or `cited` (a conversation deleted whole,
    even with no line left), go when the person chose them."""
    now = timezone.now()
    tombs: list[Tombstone] = []
    uncited: list[str] = []
    gone = [m for m, _ in pairs]
    todo = list(pairs)
    if not keep_replies:
        todo += [(r, _cascade_plan(r)) for r in replies]
        gone += replies
    # The person's words are looked for wherever they may be quoted; the companion's own lines
    # (which quote the card and the person) only where they were copied whole (transcripts).
    common = _said_elsewhere(profile_id, [m.pk for m in gone])
    quotes = Quotes(_persons_words(gone), common=common)
    records = Quotes(_persons_words(gone), whole=[m.content for m in gone if m.speaker != Message.Speaker.USER],
                     common=common)
    slice_refs_ = {m.slice.ref for m, _ in pairs} | set(cited)
    done_exps: set[int] = set()
    for message, plan in todo:
        for experience in plan.experiences_uncited:
            if experience.pk in done_exps or not Experience.objects.filter(pk=experience.pk).exists():
                continue
            before = experience.snapshot()
            experience.source_links.filter(models.Q(message=message) | models.Q(mid=message.mid)).delete()
            experience.save(update_fields=["updated_at"])
            experience.record(
                action="source_removed",
                before=before,
                actor=ExperienceHistory.Actor.SYSTEM,
                reason=f"source message {message.mid} was deleted for good",
            )
            uncited.append(experience.eid)
        relations = [r for r in plan.relations if Relation.objects.filter(pk=r.pk).exists()]
        tombs += _delete_relations(relations, now)
        experiences = [e for e in plan.experiences_deleted if e.pk not in done_exps]
        done_exps.update(e.pk for e in experiences)
        tombs += _delete_experiences(experiences, now)
        Favourite.objects.filter(message=message).delete()
        tombs += _delete_highlights(list(Highlight.objects.filter(message=message)), now)
        tombs.append(_tomb(message.profile_id, Kind.MESSAGE, message.mid, now, message.content_hash, message.created_at))
        tombs += _delete_fragments(message, now)
        _forget_attachment_on_commit(message)
    remove_derived_rows([m.pk for m in gone])
    Message.objects.filter(pk__in=[m.pk for m in gone]).delete()
    kept = []
    if keep_replies:
        kept = _scrub_messages(replies, quotes)
    removed, run = _forget_card_lines(profile_id, slice_refs_, quotes, drop_lines, anchor=anchor, now=now)
    scrub_derived(profile_id, records)
    _write_tombstones(tombs)
    return Deletion(
        "deleted", anchor,
        tombstones=[(t.kind, t.object_id) for t in tombs],
        uncited=list(dict.fromkeys(uncited)),
        replies_deleted=[] if keep_replies else [r.mid for r in replies],
        replies_kept=kept,
        card_lines_removed=removed,
        run_id=run.pk if run else None,
    )


def remove_derived_rows(message_ids: list[int]) -> None:
    """The one place where the rows derived from messages are removed when they go for good:
    the recall index and its statistics (R1), and whatever index joins it later (vectors)."""
    remove_messages(message_ids)


def _scrub_messages(messages: list[Message], quotes: Quotes) -> list[str]:
    """Kept replies: the quoted words read "[deleted]", and the index learns the new text."""
    for m in messages:
        m.content = quotes.scrub(m.content)
        m.raw_content = quotes.scrub(m.raw_content)
        m.content_hash = content_hash(m.profile.key, m.content)
        m.save(update_fields=["content", "raw_content", "content_hash"])
        for h in Highlight.objects.filter(message=m):
            h.content = quotes.scrub(h.content)
            h.save(update_fields=["content"])
    index_messages(messages)
    return [m.mid for m in messages]


def _forget_card_lines(profile_id, slice_refs_: set[str], quotes: Quotes, drop_lines: set[str], *,
                       anchor: str, now) -> tuple[list[str], EvolutionRun | None]:
    """D6/D7: card lines quoting the deleted words go; lines citing the conversation go when the
    person chose them. Recorded as a run (trigger "forget") whose texts hold no deleted word."""
    row = Card.objects.select_for_update().filter(profile_id=profile_id).first()
    if row is None or not row.text:
        return [], None
    before = row.text
    if detect_format(before) != "v5":
        after, removed = quotes.scrub(before), []
    else:
        card = parse_or_empty(before)
        chosen = {
            line.key for line in card_lines(card)
            if quotes.found(line.text) or (line.key in drop_lines and slice_refs_.intersection(line.refs))
        }
        card, gone = without_lines(card, chosen)
        if quotes.found(card.portrait):
            card = replace_portrait(card, quotes.scrub(card.portrait))
        after = render(card)
        removed = [
            {"section": line.section, "words": quotes.scrub(line.words), "text": quotes.scrub(line.text)}
            for line in gone
        ]
    if after == before:
        return [], None
    row.text = after
    row.version += 1
    row.save(update_fields=["text", "version", "updated_at"])
    summary = (
        f"{len(removed)} card line(s) removed with the deleted {anchor}"
        if removed else f"deleted words of {anchor} taken out of the card"
    )
    run = EvolutionRun.objects.create(
        profile_id=profile_id, slice=None, trigger=EvolutionRun.Trigger.FORGET,
        status=EvolutionRun.Status.CHANGED, summary=summary,
        diff=quotes.scrub(line_diff(before, after)),
        card_before=quotes.scrub(before), card_after=after,
        steps=[{"at": now.isoformat(), "kind": "forget", "anchor": anchor,
                "refs": sorted(slice_refs_), "removed": removed, "added": []}],
        model_name="", started_at=now, finished_at=now,
    )
    for slice_ in Slice.objects.filter(profile_id=profile_id, ended_at__isnull=True, injected_card__isnull=False):
        refresh_injected_card(slice_, reason="card lines removed with a deleted message")
    return [r["text"] for r in removed], run


def replace_portrait(card, text: str):
    return dataclass_replace(card, portrait=text)


def scrub_derived(profile_id: int, quotes: Quotes) -> int:
    """Replace the deleted words by "[deleted]" in every derived text of the profile that must
    stay: card snapshots, frozen injected cards, evolution runs, cognitive logs, proactive
    sends, experiences and their history, other highlights and favourites, legacy rows."""
    if not quotes:
        return 0
    changed = 0
    text_models = [
        (CardSnapshot.objects.filter(profile_id=profile_id), ["text"]),
        (Slice.objects.filter(profile_id=profile_id), ["injected_card"]),
        (ProactiveSend.objects.filter(profile_id=profile_id), ["subject"]),
        (Experience.objects.filter(profile_id=profile_id), ["title", "content", "event_time_text"]),
        (Highlight.objects.filter(profile_id=profile_id), ["content"]),
        (Favourite.objects.filter(profile_id=profile_id), ["excerpt"]),
        (LegacyFragment.objects.filter(profile_id=profile_id), ["content"]),
        (LegacyMeta.objects.filter(profile_id=profile_id), ["value"]),
    ]
    for qs, fields in text_models:
        for obj in _candidates(qs, fields, quotes):
            changed += _scrub_fields(obj, fields, [], quotes)
    # JSON-bearing rows: JSON is stored escaped (\uXXXX), so SQL LIKE cannot pre-filter them.
    json_models = [
        (EvolutionRun.objects.filter(profile_id=profile_id),
         ["summary", "diff", "card_before", "card_after", "error", "skip_reason"], ["steps"]),
        (SliceLogEntry.objects.filter(slice__profile_id=profile_id), ["summary"], ["data"]),
        (ExperienceHistory.objects.filter(experience__profile_id=profile_id), ["reason"], ["before", "after"]),
        (LegacyFragment.objects.filter(profile_id=profile_id).exclude(legacy_extra={}), [], ["legacy_extra"]),
        (LegacyMeta.objects.filter(profile_id=profile_id, metadata__isnull=False), [], ["metadata"]),
    ]
    for qs, fields, json_fields in json_models:
        for obj in qs.only("pk", *fields, *json_fields).iterator(chunk_size=500):
            changed += _scrub_fields(obj, fields, json_fields, quotes)
    return changed


def _scrub_fields(obj, fields, json_fields, quotes: Quotes) -> int:
    dirty = []
    for name in fields:
        value = getattr(obj, name)
        if isinstance(value, str) and quotes.found(value):
            setattr(obj, name, quotes.scrub(value))
            dirty.append(name)
    for name in json_fields:
        value = getattr(obj, name)
        if quotes.found_json(value):
            setattr(obj, name, quotes.scrub_json(value))
            dirty.append(name)
    if dirty:
        type(obj).objects.filter(pk=obj.pk).update(**{n: getattr(obj, n) for n in dirty})
    return bool(dirty)


def _candidates(qs, fields: list[str], quotes: Quotes, *, per_query: int = 60) -> list:
    """Rows of `qs` whose `fields` contain a piece of a deleted text (SQL pre-filter)."""
    pieces = quotes.chunks()
    seen: dict[int, object] = {}
    conditions = [models.Q(**{f"{f}__contains": p}) for p in pieces for f in fields]
    for start in range(0, len(conditions), per_query):
        q = models.Q()
        for c in conditions[start : start + per_query]:
            q |= c
        for obj in qs.filter(q):
            seen.setdefault(obj.pk, obj)
    return list(seen.values())


def _reclaim_on_commit() -> None:
    transaction.on_commit(reclaim_space)


def reclaim_space(*, using: str = "default", vacuum: bool = False) -> str:
    """After a deletion: leave no copy of deleted rows in the database files (D6).

    SQLite runs with `secure_delete` (deleted cells and pages are zeroed, settings); the WAL
    still holds the old pages until it is checkpointed, so it is checkpointed and truncated
    here. PostgreSQL keeps dead tuples until VACUUM: with `vacuum=True` (the command) the
    tables holding text are vacuumed; `VACUUM FULL` rewrites them (README)."""
    connection = connections[using]
    if connection.in_atomic_block:
        return "skipped: inside a transaction"
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            # A contentless FTS5 table keeps a deleted row's terms in its old segments until
            # they are merged: "optimize" merges them all, so the terms are gone from the file.
            cursor.execute("INSERT INTO memory_recall_fts(memory_recall_fts) VALUES ('optimize')")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            busy, frames, done = cursor.fetchone()
        return f"sqlite wal checkpoint: busy={busy} frames={frames} checkpointed={done}"
    if connection.vendor == "postgresql" and vacuum:
        tables = [m._meta.db_table for m in VACUUM_MODELS]
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f'VACUUM (ANALYZE) "{table}"')
        return f"postgresql: VACUUM of {len(tables)} tables"
    return "nothing to do"


VACUUM_MODELS = [
    Message, Card, CardSnapshot, EvolutionRun, Slice, SliceLogEntry, Highlight, Favourite,
    Experience, ExperienceHistory, ExperienceSource, Relation, ProactiveSend, LegacyFragment, LegacyMeta,
]


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


def keep_records(queryset, *, at: datetime | None = None) -> int:
    """D4 "keep": the historic soft deletes stay deleted (out of recall) and are marked reviewed."""
    return queryset.filter(deleted_at__isnull=False).update(reviewed_at=at or timezone.now())


def restore_records(queryset) -> int:
    """D4 "restore", a separate explicit action: un-flag soft-deleted rows (messages go back
    into the index); returns how many."""
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
        ] + avatar_paths(profile.pk, Profile.objects.filter(pk=profile.pk).values_list("avatar", flat=True).first())
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
    _reclaim_on_commit()
    return counts
