"""The archive write (SPEC A2, S1): the single entry point for storing a message."""

import logging
import time
from collections.abc import Container
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from memory.clock import is_zone, local_clock
from memory.hashing import content_hash
from memory.models import Message, Profile, Slice, Tombstone
from memory.recall import vectors
from memory.recall.index import index_messages

log = logging.getLogger(__name__)
LOCKED_RETRIES = 3  # attempts of one archive write when SQLite reports the database locked


class MidTombstoned(Exception):
    """The mid was deleted for good (D2, D6): a resend or a second device cannot bring it back."""

    code = "mid_deleted"

    def __init__(self, mid: str):
        self.mid = mid
        super().__init__(f"mid_deleted: message {mid} was deleted for good and cannot be archived again")


class MidConflict(Exception):
    """The mid is already archived with different content (A2: `mid_conflict`)."""

    code = "mid_conflict"

    def __init__(self, mid: str):
        self.mid = mid
        super().__init__(f"mid_conflict: message {mid} is already archived with different content")


@dataclass(frozen=True)
class Archived:
    message: Message
    created: bool  # False: the same mid and content were already stored; nothing was written
    closed_slice: Slice | None = None  # the slice this write closed by the idle gap, if any
    note: str = ""  # what the write left out, for the person (an image's frames over the budget)


def slice_gap() -> timedelta:
    return timedelta(minutes=settings.PREVIOUSLY_SLICE_GAP_MINUTES)


def archive_message(
    *,
    profile: Profile,
    mid: str,
    speaker: str,
    content: str,
    message_type: str = Message.Type.TEXT,
    created_at: datetime | None = None,
    tz: str | None = None,
    local_time: str | None = None,
    raw_content: str = "",
    status: str = Message.Status.COMPLETE,
    attachment: dict | None = None,
    source_id: str = "",
    new_conversation: bool = False,
    reply_of: Message | None = None,
    prompt_trace: dict | None = None,
) -> Archived:
    """Store one line verbatim, idempotently by mid, in the profile's current slice; a reply
    with the user line it answers (`reply_of`, U2) and its prompt's trace (U4).

    No look-up first (BENCH §2): a mid already stored fails the (profile, mid) unique
    constraint inside the write's transaction, which rolls back whole (slice touch included),
    and the stored line is answered as the same or a conflict."""
    created_at = created_at or timezone.now()
    clock = local_clock(created_at, tz, local_time)
    if not connection.in_atomic_block:
        vectors.embed_ahead([content])  # not while the write lock is held (issue 24 point 11)
    for attempt in range(1, LOCKED_RETRIES + 1):
        try:
            return _store(
                profile=profile, mid=mid, speaker=speaker, content=content, message_type=message_type,
                created_at=created_at, clock=clock, raw_content=raw_content, status=status,
                attachment=attachment, source_id=source_id, new_conversation=new_conversation,
                reply_of=reply_of, prompt_trace=prompt_trace,
            )
        except OperationalError as exc:
            # SQLite under many writers: the busy timeout ran out. Retry a few times, unless an
            # outer transaction holds our earlier writes (those cannot be replayed from here).
            if "locked" not in str(exc) or connection.in_atomic_block or attempt == LOCKED_RETRIES:
                raise
            log.warning("archive write of %s found the database locked (attempt %d); retrying", mid, attempt)
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


def _store(
    *, profile, mid, speaker, content, message_type, created_at, clock, raw_content, status,
    attachment, source_id, new_conversation, reply_of, prompt_trace,
) -> Archived:
    try:
        with transaction.atomic():
            if Tombstone.objects.line_deleted(profile.pk, mid, lock_profile=True):
                raise MidTombstoned(mid)
            slice_, closed = _slice_for(profile, created_at, clock, new_conversation)
            message = Message.objects.create(
                profile=profile,
                slice=slice_,
                mid=mid,
                speaker=speaker,
                message_type=message_type,
                content=content,
                raw_content=raw_content,
                status=status,
                created_at=created_at,
                local_day_key=clock.day_key,
                local_hour=clock.hour,
                period=clock.period,
                tz=clock.tz_name,
                source_id=source_id,
                attachment=attachment,
                content_hash=content_hash(profile.key, content),
                reply_of=reply_of,
                prompt_trace=prompt_trace,
            )
            index_messages([message], new=True, embed=True)
    except IntegrityError:
        # The mid is already stored (a resend, or a concurrent writer was first).
        existing = Message.objects.filter(profile=profile, mid=mid).first()
        if existing is None:
            raise
        return _same_or_conflict(existing, content)
    return Archived(message=message, created=True, closed_slice=closed)


def _same_or_conflict(existing: Message, content: str) -> Archived:
    if existing.content != content:
        raise MidConflict(existing.mid)
    return Archived(message=existing, created=False)


def _slice_for(profile, created_at, clock, new_conversation) -> tuple[Slice, Slice | None]:
    """The open slice if it is still warm, else close it and open a new one (S1)."""
    current = Slice.objects.newest_open(profile.pk)
    if current is not None and not new_conversation and continues(current.last_message_at, created_at):
        if created_at > current.last_message_at:
            current.last_message_at = created_at
            Slice.objects.touch(current.pk, at=created_at)
        return current, None
    closed = None
    if current is not None:
        current.close(
            reason=Slice.CloseReason.NEW_CONVERSATION if new_conversation else Slice.CloseReason.GAP
        )
        closed = current
    return open_slice(profile=profile, started_at=created_at, clock=clock), closed


# S1, written once for the live archive and the bulk import (memory.interop.legacy.write):
# a line continues its slice unless the idle gap has passed; a new slice is keyed by its local
# start minute, moved to the next free minute when that key is taken.
SLICE_KEY_FORMAT = "%Y-%m-%d-%H%M"


def continues(last_message_at: datetime, at: datetime, gap: timedelta | None = None) -> bool:
    """True when a line at `at` still belongs to a slice last spoken in at `last_message_at`."""
    return at - last_message_at <= (slice_gap() if gap is None else gap)


def free_slice_key(local_start: datetime, taken: Container[str]) -> str:
    """The key of a slice starting at `local_start`: its minute, or the next free one."""
    start = local_start.replace(second=0, microsecond=0)
    key = start.strftime(SLICE_KEY_FORMAT)
    while key in taken:
        start += timedelta(minutes=1)
        key = start.strftime(SLICE_KEY_FORMAT)
    return key


def open_slice(*, profile: Profile, started_at: datetime, clock) -> Slice:
    """A new slice keyed by its local start minute, or the next free one (S1)."""
    taken = set(
        Slice.objects.for_profile(profile)
        .filter(key__startswith=clock.local.strftime("%Y-%m-%d"))
        .values_list("key", flat=True)
    )
    remember_zone(profile, clock.tz_name)
    return Slice.objects.create(
        profile=profile, key=free_slice_key(clock.local, taken), started_at=started_at,
        last_message_at=started_at, tz=clock.tz_name,
    )


def remember_zone(profile: Profile, tz_name: str) -> None:
    """Keep the person's IANA zone on the profile (the pages show every time in it), as the
    browser sent it when a slice opens; UTC fallbacks and bare offsets do not replace a zone."""
    if not tz_name or tz_name == "UTC" or tz_name == profile.tz or not is_zone(tz_name):
        return
    Profile.objects.filter(pk=profile.pk).update(tz=tz_name)
    profile.tz = tz_name
