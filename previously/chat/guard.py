"""Chat socket guardrails (SPEC S3) and the stop switch of a reply (U2).

- `FrameLimiter`: one per socket; refuses a frame over PREVIOUSLY_WS_MAX_FRAME_BYTES and more
  than PREVIOUSLY_WS_RATE_FRAMES frames in PREVIOUSLY_WS_RATE_SECONDS (a sliding window of at
  most that many timestamps: its memory is bounded). A refused frame is dropped, never queued.
- `take_turn` / `release_turn`: one turn in flight per profile, across tabs and server
  processes, as a lease on the profile row taken by one conditional UPDATE and renewed by
  `keep_turn` while the turn runs, so a crashed process's lease runs out after TURN_LEASE.
- `Running`: the turns in flight in this process, by profile, each with its stop event. A stop
  from any tab reaches the process holding the turn through the profile's group.
"""

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from memory.models import Profile
from memory.sqlite.waiting import WritesComing

TURN_LEASE = timedelta(seconds=60)  # how long a crashed process's turn can block its profile
TURN_RENEW_SECONDS = 20.0  # a running turn renews its lease this often (well inside TURN_LEASE)


@dataclass
class FrameLimiter:
    max_bytes: int = field(default_factory=lambda: settings.PREVIOUSLY_WS_MAX_FRAME_BYTES)
    rate_frames: int = field(default_factory=lambda: settings.PREVIOUSLY_WS_RATE_FRAMES)
    rate_seconds: float = field(default_factory=lambda: settings.PREVIOUSLY_WS_RATE_SECONDS)
    _times: deque = field(default_factory=deque)
    _noticed_at: float = -1e9

    def too_large(self, text: str | None, data: bytes | None) -> int:
        """The frame's size in bytes when it is over the limit, else 0."""
        size = len(data) if data is not None else len((text or "").encode("utf-8", "surrogatepass"))
        return size if size > self.max_bytes else 0

    def too_fast(self, now: float | None = None) -> bool:
        """Count a frame; True when it is over the rate (and then it is not counted)."""
        now = time.monotonic() if now is None else now
        while self._times and now - self._times[0] >= self.rate_seconds:
            self._times.popleft()
        if len(self._times) >= self.rate_frames:
            return True
        self._times.append(now)
        return False

    def should_notice(self, now: float | None = None) -> bool:
        """One notice per window for a flood, not one per dropped frame."""
        now = time.monotonic() if now is None else now
        if now - self._noticed_at >= self.rate_seconds:
            self._noticed_at = now
            return True
        return False


def take_turn(profile: Profile) -> bool:
    """Take the profile's turn lease; False when another turn holds it (sync: run in db_call)."""
    now = timezone.now()
    return Profile.objects.take_turn(profile.pk, now=now, until=now + TURN_LEASE)


def release_turn(profile: Profile) -> None:
    Profile.objects.release_turn(profile.pk)


def renew_turn(profile: Profile) -> None:
    """Push a held lease's end out by TURN_LEASE (sync: run in db_call); a released one stays free."""
    Profile.objects.renew_turn(profile.pk, until=timezone.now() + TURN_LEASE)


async def keep_turn(profile: Profile, renew: Callable[[Profile], Awaitable[None]]) -> None:
    """Renew the profile's lease every TURN_RENEW_SECONDS until cancelled (when the turn ends)."""
    while True:
        await asyncio.sleep(TURN_RENEW_SECONDS)
        await renew(profile)


class Running:
    """This process's turns in flight: profile pk → stop event."""

    _stops: dict[int, asyncio.Event] = {}

    @classmethod
    def start(cls, profile_id: int) -> asyncio.Event:
        event = asyncio.Event()
        cls._stops[profile_id] = event
        return event

    @classmethod
    def finish(cls, profile_id: int, event: asyncio.Event) -> None:
        if cls._stops.get(profile_id) is event:
            del cls._stops[profile_id]

    @classmethod
    def stop(cls, profile_id: int) -> bool:
        event = cls._stops.get(profile_id)
        if event is None:
            return False
        event.set()
        return True


# The turn's early release (set by the consumer for the task running the turn): called by the
# turn once its reply is archived, before the final frame is sent, so the person's next line is
# never refused while the after-reply work (the turn analyzer's model call, K10) still runs.
# `freed`: the reply's own transaction already let go of the lease (`ends_with_reply`), so the
# callback has no write of its own to make: a turn waits once less for SQLite's write lock
# while another person's import or delete holds it (S4, BENCH §5).
_on_archived: ContextVar[Callable[[bool], Awaitable[None]] | None] = ContextVar("turn_on_archived", default=None)


def set_on_archived(callback: Callable[[bool], Awaitable[None]]):
    return _on_archived.set(callback)


def ends_with_reply() -> bool:
    """True when this turn's lease is the consumer's to end, so the reply's transaction may
    release it (`release_turn`) as the reply is saved; a background turn keeps its own."""
    return _on_archived.get() is not None


async def reply_archived(*, freed: bool = False) -> None:
    callback = _on_archived.get()
    if callback is not None:
        _on_archived.set(None)
        await callback(freed)


# The turn's writes announced to an import (memory.sqlite.waiting.WritesComing; set by the consumer
# for the task running the turn), paused while the model streams: seconds in which the turn
# writes nothing, while an import would wait for it before each of its parts (S4, BENCH §5).
_turn_writes: ContextVar[WritesComing | None] = ContextVar("turn_writes", default=None)


def set_turn_writes(coming: WritesComing):
    return _turn_writes.set(coming)


@contextmanager
def writes_paused():
    coming = _turn_writes.get()
    if coming is None:
        yield
        return
    with coming.paused():
        yield
