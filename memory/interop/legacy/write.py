"""Phase 3, write: every planned row, inside the import's one transaction (X4).

The two big tables (messages, fragments) go in as plain rows (bulk_insert); slices are
assigned in one pass over the sorted messages with the live archive's rule (S1); the new
messages are indexed in bulk in the same transaction (D3).
"""

from bisect import bisect_left
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

from memory.archive import continues, free_slice_key, slice_gap
from memory.clock import period_of
from memory.interop.analyse import Analyser
from memory.interop.bulk_insert import insert_rows
from memory.interop.legacy.plan import Plan, ProfilePlan
from memory.interop.legacy.report import Progress, no_progress
from memory.models import (
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    Message,
    Profile,
    Relation,
    Slice,
    Tombstone,
)
from memory.recall.index import analysis, index_messages, optimize_index

BATCH = 1000
# Messages handed to the recall index at a time: its tokens and rows for the whole import at
# once were the import's peak memory (BENCH §3); in time order, batches give the same positions.
INDEX_BATCH = 5000


def write_plan(plan: Plan, *, progress: Progress = no_progress, analyser: Analyser | None = None) -> None:
    """Write every planned row; call inside one transaction.

    `analyser`: where the new lines are tokenised for the recall index while the rows are
    inserted (memory.interop.analyse); without one, they are tokenised as they are indexed."""
    LegacyMeta.objects.bulk_create(plan.global_meta, batch_size=BATCH)
    total = len(plan.profiles)
    for i, (_key, p) in enumerate(sorted(plan.profiles.items()), 1):
        if not p.is_empty():
            _write_profile(p, user=plan.user, analyser=analyser)
        progress("writing", i, total)


def _write_profile(p: ProfilePlan, *, user, analyser: Analyser | None) -> None:
    profile = p.existing.profile or Profile.objects.create(user=user, key=p.key)
    for obj in p.tombs:
        obj.profile = profile
    Tombstone.objects.bulk_create(p.tombs, batch_size=BATCH)
    mids = _write_messages(p, profile, analyser)
    for frag in p.fragments:
        frag.profile_id = profile.pk
        frag.message_id = mids.get(frag.mid) if frag.mid else None
    insert_rows(LegacyFragment, p.fragments)
    hids = _write_highlights(p, profile, mids)
    eids = _write_experiences(p, profile, mids)
    _write_relations(p, profile, hids, eids)
    for meta in p.meta:
        meta.profile = profile
    LegacyMeta.objects.bulk_create(p.meta, batch_size=BATCH)


def _write_messages(p: ProfilePlan, profile: Profile, analyser: Analyser | None = None) -> dict[str, int]:
    """Insert the planned messages in their slices and index them; returns mid -> pk of all."""
    if not p.messages:
        return dict(p.existing.mids)
    for row in p.messages:
        row.profile_id = profile.pk
    # In time order: the time indexes grow at their end, and ids follow time as live ones do.
    p.messages.sort(key=_chronological)
    batches = [p.messages[start : start + INDEX_BATCH] for start in range(0, len(p.messages), INDEX_BATCH)]
    # The recall index's tokens, computed beside the inserts (memory.interop.analyse).
    tokens = None
    if analyser is not None:
        tokens = analyser.analyse([[m.content for m in batch if m.deleted_at is None] for batch in batches])
    assign_slices(profile=profile, messages=p.messages, tz_offset_hours=p.tz_offset_hours)
    insert_rows(Message, p.messages)
    # The raw insert returns no pks: read the new ones back by the (profile, mid) unique key.
    mids = dict(Message.objects.filter(profile=profile).order_by().values_list("mid", "pk"))
    for row in p.messages:
        row.pk = mids[row.mid]
    index_imported(batches, tokens=tokens)
    return mids


def index_imported(batches: list[list], *, tokens: Iterator[list[list[str]]] | None = None) -> None:
    """Hand the new messages to the recall index a batch at a time, inside the import's
    transaction (D3); a bulk load leaves many small full-text segments, merged once at the end.

    `tokens`: for each batch, the tokens of its live messages in order, when they were
    tokenised already (memory.interop.analyse)."""
    for batch in batches:
        analysed = None
        if tokens is not None:
            live = [m for m in batch if m.deleted_at is None]
            analysed = {m.pk: analysis(m.profile_id, toks) for m, toks in zip(live, next(tokens), strict=True)}
        index_messages(batch, new=True, analysed=analysed)
    if batches:
        optimize_index()


def _write_highlights(p: ProfilePlan, profile: Profile, mids: dict[str, int]) -> dict[str, int]:
    for hl in p.highlights:
        hl.profile = profile
        hl.message_id = mids.get(hl.mid)
        if hl.message_id is None and not hl.flagged:
            hl.flagged = f"message {hl.mid} is missing"
    Highlight.objects.bulk_create(p.highlights, batch_size=BATCH)
    hids = {k: v for k, v in p.existing.hids.items() if v is not None}
    hids.update((h.hid, h.pk) for h in p.highlights)
    return hids


def _write_experiences(p: ProfilePlan, profile: Profile, mids: dict[str, int]) -> dict[str, int]:
    for exp, _ in p.experiences:
        exp.profile = profile
    Experience.objects.bulk_create([e for e, _ in p.experiences], batch_size=BATCH)
    sources, history = [], []
    for exp, src_mids in p.experiences:
        sources.extend(
            ExperienceSource(experience=exp, mid=mid, message_id=mids.get(mid), position=pos)
            for pos, mid in enumerate(src_mids)
        )
        history.append(
            ExperienceHistory(
                experience=exp,
                actor=ExperienceHistory.Actor.IMPORT,
                action="import",
                after={"title": exp.title, "content": exp.content, "status": exp.status, "source_mids": src_mids},
                reason=f"imported from legacy key {exp.legacy_key}",
            )
        )
    ExperienceSource.objects.bulk_create(sources, batch_size=BATCH)
    ExperienceHistory.objects.bulk_create(history, batch_size=BATCH)
    eids = {k: v for k, v in p.existing.eids.items() if v is not None}
    eids.update((e.eid, e.pk) for e, _ in p.experiences)
    return eids


def _write_relations(p: ProfilePlan, profile: Profile, hids: dict[str, int], eids: dict[str, int]) -> None:
    for rel in p.relations:
        rel.profile = profile
        rel.from_highlight_id = hids.get(rel.from_id)
        rel.from_experience_id = None if rel.from_highlight_id else eids.get(rel.from_id)
        rel.to_highlight_id = hids.get(rel.to_id)
        rel.to_experience_id = None if rel.to_highlight_id else eids.get(rel.to_id)
        has_from = rel.from_highlight_id or rel.from_experience_id
        has_to = rel.to_highlight_id or rel.to_experience_id
        if not rel.flagged and not (has_from and has_to):
            rel.flagged = "missing end"
    Relation.objects.bulk_create(p.relations, batch_size=BATCH)


# ---------------------------------------------------------------- slices (S1)


def _offset_zone(hours: int):
    if hours == 0:
        return UTC, "UTC"
    sign = "+" if hours > 0 else "-"
    return timezone(timedelta(hours=hours)), f"UTC{sign}{abs(hours):02d}:00"


def assign_slices(*, profile: Profile, messages: list, tz_offset_hours: int = 0) -> None:
    """Group new messages into slices by the idle gap (S1), reusing the profile's existing slices.

    `messages` are Message instances or MessageRows; each gets its `slice_id` and, when it has
    none, the local clock of the profile's usual offset."""
    if not messages:
        return
    gap = slice_gap()
    zone, tz_name = _offset_zone(tz_offset_hours)
    hosts = _ExistingSlices(profile, gap)
    new_slices: list[Slice] = []
    members: list[tuple[object, Slice]] = []
    current: Slice | None = None
    for msg in sorted(messages, key=_chronological):
        t = msg.created_at
        host = hosts.widen(t)
        if host is None:
            if current is None or not continues(current.last_message_at, t, gap):
                key = free_slice_key(t.astimezone(zone), hosts.keys)
                hosts.keys.add(key)
                current = Slice(profile=profile, key=key, started_at=t, last_message_at=t, ended_at=t,
                                close_reason=Slice.CloseReason.IMPORT, tz=tz_name)
                new_slices.append(current)
            current.last_message_at = current.ended_at = t
            host = current
        members.append((msg, host))
    Slice.objects.bulk_create(new_slices, batch_size=BATCH)
    hosts.save()
    for msg, slice_ in members:
        msg.slice_id = slice_.pk
        _fill_local_clock(msg, zone, tz_name)


def _chronological(msg) -> tuple:
    return msg.created_at, msg.mid


def _fill_local_clock(msg, zone, tz_name: str) -> None:
    if not msg.local_day_key or msg.local_hour is None:
        local = msg.created_at.astimezone(zone)
        msg.local_day_key = msg.local_day_key or local.strftime("%Y-%m-%d")
        msg.local_hour = local.hour if msg.local_hour is None else msg.local_hour
        msg.period = msg.period or period_of(local.hour)
    msg.tz = msg.tz or tz_name


class _ExistingSlices:
    """A profile's slices before the import: a new line inside one's span (widened by the gap)
    joins it, and widens it."""

    def __init__(self, profile: Profile, gap: timedelta):
        self.gap = gap
        self.slices = list(Slice.objects.filter(profile=profile).order_by("started_at"))
        self.starts = [s.started_at for s in self.slices]
        self.keys = {s.key for s in self.slices}
        self.touched: dict[int, Slice] = {}

    def widen(self, t: datetime) -> Slice | None:
        if not self.slices:
            return None
        i = bisect_left(self.starts, t + self.gap)
        for s in self.slices[max(0, i - 2) : i][::-1]:
            if s.started_at - self.gap <= t and continues(s.last_message_at, t, self.gap):
                if t < s.started_at:
                    s.started_at = t
                if t > s.last_message_at:
                    s.last_message_at = t
                    if s.ended_at is not None and s.ended_at < t:
                        s.ended_at = t
                self.touched[s.pk] = s
                return s
        return None

    def save(self) -> None:
        if self.touched:
            Slice.objects.bulk_update(list(self.touched.values()), ["started_at", "last_message_at", "ended_at"])
