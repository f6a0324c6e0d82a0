"""The card's Django side (K8, K9, K12): load, commit with the concurrency guard, snapshots,
the injected copy frozen per slice. No model calls: the agent proposes, this disposes.

Concurrency (K8): an evolution run works on an in-memory copy for many seconds (model
calls), so it cannot hold a lock meanwhile. It records the *accepted* tool calls and, at
commit, locks the live card row (`select_for_update`; SQLite's IMMEDIATE transactions
serialise writers the same way). If the row's `version` moved since the run read it, the
run's accepted calls are replayed, in order, onto the newer card through the same
validated mutations (a rebase); a call the newer card refuses is dropped and reported,
never forced. So two runs on one profile can both land and neither loses an update.
"""

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from memory.card import Card as ParsedCard
from memory.card import (
    Header,
    RefsResolver,
    apply_tool,
    detect_format,
    empty_card,
    parse,
    render,
    render_injected,
    stamp,
)
from memory.clock import local_clock
from memory.models import Card, CardSnapshot, Profile, Slice, SliceLogEntry


def live_card(profile: Profile) -> Card:
    """The profile's live card row, created empty on first use."""
    row, _ = Card.objects.get_or_create(profile=profile)
    return row


def parse_or_empty(text: str) -> ParsedCard:
    """The parsed card, or an empty one for empty or older-format text (migrated by a run)."""
    if detect_format(text) != "v5":
        return empty_card()
    return parse(text)


def refs_resolver(profile: Profile) -> RefsResolver:
    """Refs resolve only to slices of this profile (K2)."""

    def missing(refs: Sequence[str]) -> set[str]:
        keys = {r.replace("/", "-") for r in refs}
        found = set(
            Slice.objects.for_profile(profile).filter(key__in=keys).values_list("key", flat=True)
        )
        return {r for r in refs if r.replace("/", "-") not in found}

    return missing


def card_at(profile: Profile, slice_: Slice) -> str | None:
    """The card text as it was when `slice_` ended (K12), or None when none was recorded."""
    snap = CardSnapshot.objects.filter(profile=profile, slice=slice_).first()
    return snap.text if snap else None


@dataclass
class Commit:
    changed: bool
    text: str  # the live card text after the commit
    version: int
    rebased: bool = False
    dropped: list[str] = field(default_factory=list)  # refusals while rebasing


def commit_card(
    *,
    profile: Profile,
    base_version: int,
    base_text: str,
    mutations: Sequence[tuple[str, Mapping[str, object]]],
    slice_: Slice | None,
    run=None,
    now: datetime | None = None,
) -> Commit:
    """Write the run's accepted mutations to the live card and the slice snapshot (K7, K8)."""
    now = now or timezone.now()
    refs_exist = refs_resolver(profile)
    with transaction.atomic():
        live_card(profile)
        row = Card.objects.select_for_update().get(profile=profile)
        rebased = row.version != base_version
        start = row.text if rebased else base_text
        card = parse_or_empty(start)
        dropped: list[str] = []
        for name, arguments in mutations:
            result = apply_tool(card, name, arguments, refs_exist=refs_exist)
            if result.accepted:
                card = result.card
            else:
                dropped.append(f"{name}: {result.message}")
        current = parse_or_empty(row.text)
        # K7: compare substance only; the header (slice, stamp) is ours, not the agent's.
        unchanged = detect_format(row.text) != "legacy" and render(
            replace(card, header=current.header)
        ) == render(current)
        if unchanged:
            if slice_ is not None and not CardSnapshot.objects.filter(slice=slice_).exists():
                _snapshot(profile, slice_, row, run)
            return Commit(False, row.text, row.version, rebased, dropped)
        active = slice_.key if slice_ is not None else _latest_slice_key(profile)
        stamped = (
            stamp(card, active_slice=active, at=now)
            if active
            else replace(card, header=Header(updated=now.strftime("%Y-%m-%dT%H:%M:%SZ")))
        )
        row.text = render(stamped)
        row.format = "v5"
        row.version += 1
        row.save(update_fields=["text", "format", "version", "updated_at"])
        if slice_ is not None:
            _snapshot(profile, slice_, row, run)
        return Commit(True, row.text, row.version, rebased, dropped)


def _latest_slice_key(profile: Profile) -> str | None:
    latest = Slice.objects.for_profile(profile).order_by("-started_at").first()
    return latest.key if latest else None


def _snapshot(profile: Profile, slice_: Slice, row: Card, run=None) -> CardSnapshot:
    snap, _ = CardSnapshot.objects.update_or_create(
        slice=slice_,
        defaults={"profile": profile, "text": row.text, "card_version": row.version, "run": run},
    )
    return snap


def snapshot_slice(slice_: Slice) -> CardSnapshot:
    """Record the live card as the card at the end of `slice_` (K8), evolved or not."""
    with transaction.atomic():
        row = live_card(slice_.profile)
        return _snapshot(slice_.profile, slice_, row)


def line_diff(before: str, after: str) -> str:
    """A unified line diff of two card texts (K11)."""
    return "\n".join(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), "before", "after", lineterm=""
        )
    )


# --- K9: the injected copy ---------------------------------------------------------------


def _slice_now(slice_: Slice, now: datetime | None) -> datetime:
    return local_clock(now or timezone.now(), slice_.tz).local


def injected_card_for(slice_: Slice, *, now: datetime | None = None) -> str:
    """The card as the prompt shows it, frozen on the slice at first use (K9)."""
    if slice_.injected_card is not None:
        return slice_.injected_card
    return refresh_injected_card(slice_, now=now, reason="")


def refresh_injected_card(slice_: Slice, *, now: datetime | None = None, reason: str) -> str:
    """Re-render and re-freeze the injected card; a non-empty reason is a logged cache break."""
    text = live_card(slice_.profile).text
    card = parse_or_empty(text)
    if not text.strip():
        rendered = ""
    elif detect_format(text) != "v5":
        # An older card is injected as it stands until a run migrates it: never dropped.
        rendered = text.strip()
    else:
        rendered = render_injected(
            card, now=_slice_now(slice_, now), language=slice_.profile.language
        )
    slice_.injected_card = rendered
    Slice.objects.filter(pk=slice_.pk).update(injected_card=rendered)
    if reason:
        SliceLogEntry.objects.create(
            slice=slice_,
            kind=SliceLogEntry.Kind.NOTE,
            summary=f"injected card re-rendered: {reason}"[:500],
            data={"event": "cache_break", "reason": reason},
        )
    return rendered
