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
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from datetime import datetime

from django.core.files.storage import default_storage
from django.db import connections, models, transaction
from django.utils import timezone

from memory import forget_journal
from memory.card import detect_format, render
from memory.card.format import PERSON_REF
from memory.card.lines import CardLine, card_lines, citing_instead, without_lines
from memory.card.store import line_diff, parse_or_empty, refresh_injected_card
from memory.deleted_words import Quotes, json_strings
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


def _plan(message: Message, quotes: Quotes | None = None) -> _Plan:
    plan = _cascade_plan(message)
    quotes = quotes if quotes is not None else _persons_quotes(message.profile_id, [message])
    plan.replies = quoting_replies(message.profile_id, quotes, exclude=[message.pk])
    plan.card_lines = citing_card_lines(message.profile_id, {message.slice.ref}, quotes)
    return plan


class _SaidElsewhere:
    """A run the person also said in a line that stays is their everyday wording, not a quote
    of the deleted line: it is neither looked for in replies and cards nor blanked. The lines
    sharing words with the deleted ones are found by one scan, at the first question."""

    def __init__(self, profile_id: int, gone_ids: list[int], words: list[str]):
        self.others = (Message.objects.filter(profile_id=profile_id, speaker=Message.Speaker.USER)
                       .exclude(pk__in=gone_ids).values_list("content", flat=True))
        self.words = words
        self.lines: list[str] | None = None

    def read(self) -> list[str]:
        if self.lines is None:
            probe = Quotes(self.words)
            self.lines = [line for batch in _in_batches(self.others) for line in probe.blanked(batch)]
        return self.lines

    def __call__(self, run: str) -> bool:
        return any(run in line for line in self.read())


def _persons_words(messages) -> list[str]:
    return [m.content for m in messages if m.speaker == Message.Speaker.USER]


def _persons_quotes(profile_id: int, messages: list[Message]) -> Quotes:
    words = _persons_words(messages)
    return Quotes(words, common=_SaidElsewhere(profile_id, [m.pk for m in messages], words))


def _in_batches(rows, size: int = 500):
    """A queryset read in batches (one pass, rows streamed), for `Quotes.spans_many`."""
    batch = []
    for row in rows.iterator(chunk_size=size):
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def quoting_replies(profile_id: int, quotes: Quotes, *, exclude=(), after: int = 0) -> list[Message]:
    """The companion's lines (with an id above `after`) that quote a deleted text verbatim (D6)."""
    if not quotes:
        return []
    rows = (Message.objects.filter(profile_id=profile_id, speaker=Message.Speaker.ASSISTANT, pk__gt=after)
            .exclude(pk__in=exclude).values_list("pk", "content", "raw_content"))
    found: list[int] = []
    for batch in _in_batches(rows):
        hits = quotes.blanked(s for _, content, raw in batch for s in (content, raw) if s)
        found += [pk for pk, content, raw in batch if content in hits or raw in hits]
    return list(Message.objects.filter(pk__in=found).select_related("slice", "profile"))


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
    when their key is in `drop_lines` (the person's choice, D7). Its words are looked for
    before the write lock is taken (`_forget_messages`)."""
    current = Message.objects.filter(pk=message.pk).select_related("slice").first()
    if current is None:
        return Deletion("already_gone", message.mid)
    marks = _Marks.take(current.profile_id)
    quotes = _persons_quotes(current.profile_id, [current])
    plan = _plan(current, quotes)
    if plan.anything and not force:
        raise HasRefs(plan.refs())

    def relock() -> list[tuple[Message, _Plan]] | None:
        locked = Message.objects.select_for_update().filter(pk=message.pk).select_related("slice").first()
        if locked is None:
            return None
        again = _cascade_plan(locked)
        if again.anything and not force:
            raise HasRefs(again.refs())
        return [(locked, again)]

    result = _forget_messages(
        current.profile_id, [current], relock, replies=plan.replies, quotes=quotes, marks=marks,
        keep_replies=keep_replies, drop_lines=set(drop_lines), anchor=current.mid, force=force,
    )
    _reclaim_on_commit()
    if result is None:
        return Deletion("already_gone", message.mid)
    result.mid = current.mid
    return result


def delete_message(*, profile: Profile, mid: str, hard: bool = False, force: bool = False,
                   keep_replies: bool = False, drop_lines: Iterable[str] = ()) -> Deletion:
    """The one entry point by mid (views, API, command): hide, or delete for good (D1, D2, D6)."""
    message = Message.objects.filter(profile=profile, mid=mid).first()
    if message is None:
        if Tombstone.objects.line_deleted(profile.pk, mid):
            return Deletion("already_gone", mid)
        raise MessageNotFound(mid)
    if hard:
        return hard_delete_message(message, force=force, keep_replies=keep_replies, drop_lines=drop_lines)
    return Deletion("hidden" if hide_message(message) else "already_hidden", mid)


def slice_refs(slice_: Slice) -> list[dict]:
    """What deleting the whole conversation takes with it or changes (D6, D7)."""
    messages = list(Message.objects.filter(slice=slice_))
    plan = _Plan([], [], [], [], [])
    for m in messages:
        part = _cascade_plan(m)
        plan.highlights += part.highlights
        plan.favourites += part.favourites
        plan.experiences_deleted += [e for e in part.experiences_deleted if e not in plan.experiences_deleted]
        plan.experiences_uncited += [e for e in part.experiences_uncited if e not in plan.experiences_uncited]
        plan.relations += [r for r in part.relations if r not in plan.relations]
    _quoted_by(plan, slice_, messages, _persons_quotes(slice_.profile_id, messages))
    return plan.refs()


def _quoted_by(plan: _Plan, slice_: Slice, messages: list[Message], quotes: Quotes) -> _Plan:
    plan.replies = quoting_replies(slice_.profile_id, quotes, exclude=[m.pk for m in messages])
    plan.card_lines = citing_card_lines(slice_.profile_id, {slice_.ref}, quotes)
    return plan


def delete_slice(slice_: Slice, *, keep_replies: bool = False, drop_lines: Iterable[str] = ()) -> Deletion:
    """Delete a whole conversation for good (D6): every line with its cascade and tombstones,
    its snapshot and cognitive log, its words everywhere else; the slice row goes last."""
    messages = list(Message.objects.filter(slice=slice_).select_related("slice").order_by("created_at", "id"))
    marks = _Marks.take(slice_.profile_id)
    quotes = _persons_quotes(slice_.profile_id, messages)
    plan = _quoted_by(_Plan([], [], [], [], []), slice_, messages, quotes)

    def relock() -> list[tuple[Message, _Plan]]:
        locked = list(Message.objects.select_for_update().filter(slice=slice_).select_related("slice")
                      .order_by("created_at", "id"))
        # Each line's own cascade (an experience citing two lines of this slice goes once).
        return [(m, _cascade_plan(m)) for m in locked]

    def last() -> None:
        # Runs keep their (scrubbed) record; the slice's snapshot and log go with the row.
        Slice.objects.filter(pk=slice_.pk).delete()

    result = _forget_messages(
        slice_.profile_id, messages, relock, replies=plan.replies, quotes=quotes, marks=marks,
        keep_replies=keep_replies, drop_lines=set(drop_lines), anchor=slice_.key, cited={slice_.ref},
        force=True, last=last,
    )
    _reclaim_on_commit()
    result.mid = slice_.key
    return result


# Derived rows that may hold a deleted line's words and stay, scrubbed (D6): the model, its
# profile lookup, its text fields and its JSON fields (whose strings are searched one by one).
_DERIVED = [
    (CardSnapshot, "profile_id", ["text"], []),
    (Slice, "profile_id", ["injected_card"], []),
    (ProactiveSend, "profile_id", ["subject"], []),
    (Experience, "profile_id", ["title", "content", "event_time_text"], []),
    (Highlight, "profile_id", ["content"], []),
    (Favourite, "profile_id", ["excerpt"], []),
    (LegacyFragment, "profile_id", ["content"], ["legacy_extra"]),
    (LegacyMeta, "profile_id", ["value"], ["metadata"]),
    (EvolutionRun, "profile_id", ["summary", "diff", "card_before", "card_after", "error", "skip_reason"], ["steps"]),
    (SliceLogEntry, "slice__profile_id", ["summary"], ["data"]),
    (ExperienceHistory, "experience__profile_id", ["reason"], ["before", "after"]),
]
# Rows written per transaction, and how long one transaction may hold the write lock before
# the rest wait for the next one (SQLite has one writer; issue 24 point 3: <= 200 ms).
_ROWS_PER_WRITE = 200
_WRITE_BUDGET_SECONDS = 0.1
# On PostgreSQL a row can commit after one with a higher id: rows this far below the
# high-water mark are read again in the last transaction too (SQLite has one writer at a time).
_RECENT_POSTGRESQL = 20


@dataclass
class _Marks:
    """What the scan could see: the highest id of each model when it began and the runs not
    finished then. The last transaction reads again what lies past them: rows written since,
    runs still writing their steps, open conversations' frozen cards, experiences changed."""

    at: datetime
    top: dict
    running: list[int]
    recent: int = 0

    @classmethod
    def take(cls, profile_id: int) -> "_Marks":
        models_ = [Message] + [model for model, *_ in _DERIVED]
        top = {model: model.objects.aggregate(top=models.Max("pk"))["top"] or 0 for model in models_}
        running = list(EvolutionRun.objects.filter(profile_id=profile_id, finished_at__isnull=True)
                       .values_list("pk", flat=True))
        recent = _RECENT_POSTGRESQL if connections["default"].vendor == "postgresql" else 0
        return cls(timezone.now(), top, running, recent)

    def since(self, model, qs):
        changed = models.Q(pk__gt=self.top[model] - self.recent)
        if model is EvolutionRun:
            changed |= models.Q(pk__in=self.running)
        elif model is Slice:
            changed |= models.Q(ended_at__isnull=True)
        elif model is Experience:
            changed |= models.Q(updated_at__gte=self.at)
        return qs.filter(changed)


@dataclass
class _Fix:
    """One derived row holding deleted words: its fields as read and as they will read."""

    model: type
    pk: int
    old: dict
    new: dict


def _forget_messages(profile_id: int, messages: list[Message], relock, *, replies: list[Message],
                     quotes: Quotes, marks: _Marks, keep_replies: bool, drop_lines: set[str], anchor: str,
                     force: bool, cited: set[str] = frozenset(), last=None) -> Deletion | None:
    """The body of every hard delete (issue 24 point 3: no search under the write lock).

    1. Read, without a transaction: which derived rows hold the deleted words (the person's
       words wherever they may be quoted; the companion's own lines only where they were copied
       whole, as in transcripts).
    2. Write those rows in short transactions; each re-reads its rows and scrubs again what
       changed since it was read.
    3. One last short transaction: `relock()` locks the messages again and returns each with
       its cascade (None: already gone); replies quoting them written since the scan join
       them; the cascade, tombstones, card lines and index go; then whatever was written since
       the scan is searched and scrubbed (`_Marks.since`), so no copy made meanwhile stays.
    Card lines citing the messages' conversations, or `cited` (a conversation deleted whole,
    even with no line left), go when the person chose them. `last()` runs at the end of 3."""
    gone = list(messages) + ([] if keep_replies else list(replies))
    records = _records(gone, quotes)
    if isinstance(quotes.common, _SaidElsewhere):
        quotes.common.read()  # the person's other lines are read now, not under the lock
    _write_fixes(_scan(profile_id, records), records)
    with transaction.atomic():
        pairs = relock()
        if pairs is None:
            return None
        locked = [m for m, _ in pairs]
        changed = [(m.pk, m.content) for m in locked] != [(m.pk, m.content) for m in messages]
        if changed:
            # A line arrived or changed since the read (rare): rows older than the scan cannot
            # hold its words, so only what was written since is searched with them (below).
            quotes = _persons_quotes(profile_id, locked)
        late = quoting_replies(profile_id, quotes, exclude=[m.pk for m in locked] + [r.pk for r in replies],
                               after=marks.top[Message] - marks.recent)
        if late and not force:
            raise HasRefs([{"kind": "reply", "id": m.mid, "text": m.content[:200]} for m in late])
        replies = list(replies) + late
        result = _forget_locked(profile_id, pairs, replies=replies, quotes=quotes, keep_replies=keep_replies,
                                drop_lines=drop_lines, anchor=anchor, cited=cited)
        if changed or (late and not keep_replies):
            records = _records(locked + ([] if keep_replies else replies), quotes)
        recent = [(model, marks.since(model, qs)) for model, qs in _derived_querysets(profile_id)]
        _apply_fixes(_scan(profile_id, records, querysets=recent), records)
        if last is not None:
            last()
    return result


def _records(gone: list[Message], quotes: Quotes) -> Quotes:
    return Quotes(_persons_words(gone), whole=[m.content for m in gone if m.speaker != Message.Speaker.USER],
                  common=quotes.common)


def _forget_locked(profile_id: int, pairs: list[tuple[Message, _Plan]], *, replies: list[Message],
                   quotes: Quotes, keep_replies: bool, drop_lines: set[str], anchor: str,
                   cited: set[str]) -> Deletion:
    """Step 3 of `_forget_messages`: the cascade of each message, the quoting replies, the card."""
    now = timezone.now()
    tombs: list[Tombstone] = []
    uncited: list[str] = []
    gone = [m for m, _ in pairs]
    todo = list(pairs)
    if not keep_replies:
        todo += [(r, _cascade_plan(r)) for r in replies]
        gone += replies
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
    removed, run = _forget_card_lines(profile_id, slice_refs_, quotes, drop_lines, anchor=anchor, now=now,
                                      deleted_conversations=set(cited))
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
                       anchor: str, now, deleted_conversations: set[str] = frozenset()
                       ) -> tuple[list[str], EvolutionRun | None]:
    """D6/D7: card lines quoting the deleted words go; lines citing the conversation go when the
    person chose them. Lines the person keeps that cite a conversation deleted whole cite the
    person (`[you]`) instead: they are theirs now, and the agent treats them so (K16). Recorded
    as a run (trigger "forget") whose texts hold no deleted word."""
    row = Card.objects.select_for_update().filter(profile_id=profile_id).first()
    if row is None or not row.text:
        return [], None
    before = row.text
    kept: list[dict] = []
    if detect_format(before) != "v5":
        after, removed = quotes.scrub(before), []
    else:
        card = parse_or_empty(before)
        chosen = {
            line.key for line in card_lines(card)
            if quotes.found(line.text) or (line.key in drop_lines and slice_refs_.intersection(line.refs))
        }
        card, gone = without_lines(card, chosen)
        orphans = {line.key for line in card_lines(card) if deleted_conversations.intersection(line.refs)}
        card, recited = citing_instead(card, orphans, set(deleted_conversations), PERSON_REF)
        kept = [{"section": line.section, "words": line.words, "text": line.words} for line in recited]
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
    if detect_format(before) == "v5":  # O6: a restore takes these lines off again
        forget_journal.record(forget_journal.entry(forget_journal.CARD_LINE, line.key, profile_id=profile_id, at=now)
                              for line in gone)
    summary = (
        f"{len(removed)} card line(s) removed with the deleted {anchor}"
        if removed else f"deleted words of {anchor} taken out of the card"
    )
    if kept:
        summary += f"; {len(kept)} kept, now citing you"
    run = EvolutionRun.objects.create(
        profile_id=profile_id, slice=None, trigger=EvolutionRun.Trigger.FORGET,
        status=EvolutionRun.Status.CHANGED, summary=summary,
        diff=quotes.scrub(line_diff(before, after)),
        card_before=quotes.scrub(before), card_after=after,
        steps=[{"at": now.isoformat(), "kind": "forget", "anchor": anchor,
                "refs": sorted(slice_refs_), "removed": removed, "added": kept}],
        model_name="", started_at=now, finished_at=now,
    )
    for slice_ in Slice.objects.filter(profile_id=profile_id, ended_at__isnull=True, injected_card__isnull=False):
        refresh_injected_card(slice_, reason="card lines removed with a deleted message")
    return [r["text"] for r in removed], run


def forget_card_lines_again(profile_id: int, keys: set[str]) -> int:
    """O6: after a restore, take off the card again the lines (by key) that a delete made after
    the backup took off; the number removed. Lines edited since no longer match, and stay."""
    with transaction.atomic():
        row = Card.objects.select_for_update().filter(profile_id=profile_id).first()
        if row is None or not row.text or detect_format(row.text) != "v5":
            return 0
        card, gone = without_lines(parse_or_empty(row.text), keys)
        if not gone:
            return 0
        row.text = render(card)
        row.version += 1
        row.save(update_fields=["text", "version", "updated_at"])
        for slice_ in Slice.objects.filter(profile_id=profile_id, ended_at__isnull=True, injected_card__isnull=False):
            refresh_injected_card(slice_, reason="card lines removed again after a restore")
    return len(gone)


def replace_portrait(card, text: str):
    return dataclass_replace(card, portrait=text)


def _derived_querysets(profile_id: int) -> list:
    return [(model, model.objects.filter(**{lookup: profile_id})) for model, lookup, _, _ in _DERIVED]


def _fields_of(model) -> tuple[list[str], list[str]]:
    return next((fields, json_fields) for m, _, fields, json_fields in _DERIVED if m is model)


def _scan(profile_id: int, quotes: Quotes, *, querysets=None) -> list[_Fix]:
    """The derived rows of the profile holding the deleted words, read in one pass each (no
    transaction needed): what each field reads now and will read scrubbed."""
    if not quotes:
        return []
    fixes: list[_Fix] = []
    for model, qs in querysets if querysets is not None else _derived_querysets(profile_id):
        fields, json_fields = _fields_of(model)
        names = fields + json_fields
        for batch in _in_batches(qs.order_by().values_list("pk", *names)):
            blanked = quotes.blanked(s for row in batch for s in _strings(row[1:], len(fields)))
            if not blanked:
                continue
            for pk, *values in batch:
                new = {}
                for name, value in zip(names, values, strict=True):
                    if name in fields:
                        if isinstance(value, str) and value in blanked:
                            new[name] = blanked[value]
                    elif value is not None and any(s in blanked for s in json_strings(value)):
                        new[name] = quotes.scrub_json(value, blanked)
                if new:
                    fixes.append(_Fix(model, pk, {n: values[names.index(n)] for n in new}, new))
    return fixes


def _strings(values, n_text: int):
    for i, value in enumerate(values):
        if i < n_text:
            if isinstance(value, str) and value:
                yield value
        elif value is not None:
            yield from json_strings(value)


def _write_fixes(fixes: list[_Fix], quotes: Quotes) -> None:
    """Step 2 of `_forget_messages`: the fixes in short transactions, each let go after
    `_WRITE_BUDGET_SECONDS` (or `_ROWS_PER_WRITE` rows) so others may write in between."""
    done = 0
    while done < len(fixes):
        with transaction.atomic():
            began = time.monotonic()
            while True:  # one chunk at least, more while the budget lasts
                chunk = fixes[done : done + _ROWS_PER_WRITE]
                _apply_fixes(chunk, quotes)
                done += len(chunk)
                if done >= len(fixes) or time.monotonic() - began >= _WRITE_BUDGET_SECONDS:
                    break


def _apply_fixes(fixes: list[_Fix], quotes: Quotes) -> None:
    """Write each fix, inside the caller's transaction, after reading the row again: a field
    changed since it was read is scrubbed as it reads now (nothing written meanwhile is lost,
    and no deleted word is written back)."""
    by_model: dict[type, list[_Fix]] = {}
    for fix in fixes:
        by_model.setdefault(fix.model, []).append(fix)
    for model, group in by_model.items():
        fields, _ = _fields_of(model)
        names = sorted({n for fix in group for n in fix.old})
        current = {pk: dict(zip(names, values, strict=True)) for pk, *values in
                   model.objects.filter(pk__in=[f.pk for f in group]).values_list("pk", *names)}
        for fix in group:
            now = current.get(fix.pk)
            if now is None:
                continue  # gone meanwhile
            update = {}
            for name, old in fix.old.items():
                if now[name] == old:
                    update[name] = fix.new[name]
                elif name in fields:
                    if isinstance(now[name], str) and quotes.found(now[name]):
                        update[name] = quotes.scrub(now[name])
                elif quotes.found_json(now[name]):
                    update[name] = quotes.scrub_json(now[name])
            if update:
                model.objects.filter(pk=fix.pk).update(**update)


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
    # O6: the same ids and hashes outside the database, so a restore forgets them again.
    forget_journal.record(
        forget_journal.entry(t.kind, t.object_id, profile_id=t.profile_id, content_hash=t.content_hash,
                             at=t.deleted_at)
        for t in tombs
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
        forget_journal.record([forget_journal.entry(
            forget_journal.PROFILE, profile.key, profile_id=profile.pk, profile_key=profile.key,
            user_id=profile.user_id)])
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
