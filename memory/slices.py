"""Closing slices (S1) and their cognitive log (S2); what happens *after* a close (the
analyzer, evolution) belongs to `previously.agent`, which calls these."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import override

from memory.archive import slice_gap
from memory.card.store import snapshot_slice
from memory.models import CardSnapshot, Profile, Slice, SliceLogEntry


def close_slice(slice_: Slice, *, reason: str, at: datetime | None = None) -> bool:
    """Close one slice and record the card as it was at its end (K8); False if already closed."""
    with transaction.atomic():
        locked = Slice.objects.select_for_update().get(pk=slice_.pk)
        if locked.ended_at is not None:
            return False
        locked.close(reason=reason, at=at)
        slice_.ended_at, slice_.close_reason = locked.ended_at, locked.close_reason
        snapshot_slice(locked)
        log(locked, SliceLogEntry.Kind.NOTE, _closed_note(locked),
            event="closed", reason=reason)
    return True


def _closed_note(slice_: Slice) -> str:
    """The log's note, in English whatever page closed the slice (the labels are translated)."""
    with override("en"):
        return f"slice closed ({slice_.get_close_reason_display()})"


def on_closed(slice_: Slice) -> None:
    """Bookkeeping for a slice that `archive_message` closed by the idle gap: its snapshot."""
    if not CardSnapshot.objects.filter(slice=slice_).exists():
        snapshot_slice(slice_)
    log(slice_, SliceLogEntry.Kind.NOTE, _closed_note(slice_),
        event="closed", reason=slice_.close_reason)


def idle_slices(*, now: datetime | None = None):
    """Open slices whose last message is older than the idle gap (S1)."""
    now = now or timezone.now()
    return Slice.objects.open().filter(last_message_at__lt=now - slice_gap()).select_related(
        "profile"
    )


def close_idle_slices(*, now: datetime | None = None) -> list[Slice]:
    """Close every idle open slice (the periodic check of S1); returns those it closed."""
    closed = []
    for slice_ in idle_slices(now=now):
        if close_slice(slice_, reason=Slice.CloseReason.IDLE_CHECK):
            closed.append(slice_)
    return closed


def close_current_slice(profile: Profile) -> Slice | None:
    """The user starts a new conversation: close the open slice, if any (S1)."""
    current = Slice.objects.for_profile(profile).open().order_by("-started_at").first()
    if current is not None and close_slice(current, reason=Slice.CloseReason.NEW_CONVERSATION):
        return current
    return None


def log(slice_: Slice, kind: str, summary: str, **data) -> SliceLogEntry:
    """Append one line to the slice's cognitive log (S2)."""
    return SliceLogEntry.objects.create(slice=slice_, kind=kind, summary=summary[:500], data=data)
