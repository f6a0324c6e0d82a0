"""The chat websocket (STYLE 8: a view for sockets): authenticate, parse the frame, hand it on.

Each socket joins its profile's group (`previously.push.profile_group`). Background work
(card evolution, proactive lines, …) pushes to the page with `previously.push.push(profile,
html)` — a ``{"type": "page.event", "html": "<…hx-swap-oob…>"}`` message; the html is sent as
is and htmx swaps it out-of-band. `turn.stop` asks the process holding the profile's turn to stop it.
"""

import asyncio
import functools
import json
import logging
from importlib import import_module
from types import SimpleNamespace

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy

from memory import limits
from memory.models import Profile
from memory.models.archive import OBJECT_ID_RE
from memory.sqlite.waiting import WritesComing
from previously.chat import guard, off_record, steps, turn
from previously.chat.db import db_call, frame_arrived
from previously.chat.proactive import should_welcome_back, welcome_back_task
from previously.llm import gate
from previously.push import profile_group, session_group

log = logging.getLogger(__name__)
TURN_DRAIN_SECONDS = 120
# Lines this socket sent while its own turn still held the profile: they wait and are sent, in
# order, when it ends (issue 25 point 1). More than this are refused, their text given back.
MAX_WAITING_LINES = 5
TURN_ACTIONS = {
    "send": turn.handle_send, "retry": turn.handle_retry, "reply": turn.handle_reply,
    "regenerate": turn.handle_regenerate, "edit": turn.handle_edit,
}
# P5: the frames of an off-the-record conversation (its state is the socket's `off_record`).
OFF_ACTIONS = {"off_send": off_record.handle_send, "off_regenerate": off_record.handle_regenerate}
release_turn = db_call(guard.release_turn)
renew_turn = db_call(guard.renew_turn)


@db_call
def _owned_profile(user, key: str) -> Profile | None:
    return Profile.objects.for_user(user).filter(key=key).first()


@db_call
def _welcome_back_if_away(profile: Profile) -> None:
    """K15: a page opened after a long gap queues a message written first (off this path)."""
    try:
        if should_welcome_back(profile):
            welcome_back_task.enqueue(profile.pk)
    except Exception:  # noqa: BLE001 - never in the way of opening the chat
        log.exception("welcome-back check failed for profile %s", profile.pk)


# S5 (issue 16): every frame shape gets a clear refusal. The fields a frame may carry are text
# (or absent/null); the ones naming a message are full-match ids.
FRAME_TEXT_FIELDS = ("action", "mid", "text", "local_time", "tz", "after", "failed")
FRAME_ID_FIELDS = ("mid", "after", "failed")


def frame_problem(data) -> str | None:
    """Why a parsed frame cannot be handled (translatable), or None when its shape is right."""
    if not isinstance(data, dict):
        return gettext_lazy("Unreadable frame: expected JSON.")
    for name in FRAME_TEXT_FIELDS:
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            return format_lazy(gettext_lazy("Unreadable frame: “{field}” must be text."), field=name)
        if not _storable(value):
            return format_lazy(gettext_lazy("Unreadable frame: “{field}” has a character that cannot be stored."),
                               field=name)
        if name in FRAME_ID_FIELDS and value and not OBJECT_ID_RE.fullmatch(value):
            return format_lazy(gettext_lazy("Unreadable frame: “{field}” is not a message id."), field=name)
    return None


def _storable(text: str) -> bool:
    """No lone surrogate (not UTF-8) and no NUL (PostgreSQL refuses it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _session_alive(scope) -> bool:
    """S5: the socket's login session still logs in its user, as an HTTP request would find it:
    logout flushes the session; a password change (issue 24 point 9) changes the user's auth
    hash, which no longer matches the one the session holds (Django's `get_user` checks it)."""
    session = scope.get("session")
    if session is None or not getattr(session, "session_key", None):
        return True  # no cookie session (in-process test scopes): nothing to re-check
    fresh = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session.session_key)
    return get_user(SimpleNamespace(session=fresh)).pk == scope["user"].pk


@db_call
def _alive_taking_turn(scope, profile: Profile | None) -> tuple[bool, bool]:
    """(alive, taken): the session check (`_session_alive`; none when `scope` is None), then,
    when it passes and `profile` is given, the profile's turn lease (S3, `guard.take_turn`)."""
    alive = scope is None or _session_alive(scope)
    return alive, bool(alive and profile is not None and guard.take_turn(profile))


class ChatConsumer(AsyncWebsocketConsumer):
    """Turns run as tasks, one at a time per profile (S3), so page events (card evolution progress,
    K11) reach the page while a reply is still streaming."""

    async def connect(self):
        self.turn_lock = asyncio.Lock()
        self.limiter = guard.FrameLimiter()
        self.turns: set[asyncio.Task] = set()
        self.turn_over: asyncio.Event | None = None  # set when this socket's latest turn lets go
        self.waiting = 0  # lines queued behind it
        self.off_record: off_record.OffRecord | None = None  # P5: lives and dies with this socket
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.profile = await _owned_profile(user, self.scope["url_route"]["kwargs"]["profile_key"])
        if self.profile is None:  # not this user's profile (P2): same answer as a missing one
            await self.close(code=4403)
            return
        self.group = profile_group(self.profile)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # O5: signing this session out elsewhere (another device, a password change) closes it.
        session_key = getattr(self.scope.get("session"), "session_key", None)
        self.session_group = session_group(session_key) if session_key else None
        if self.session_group:
            await self.channel_layer.group_add(self.session_group, self.channel_name)
        await self.accept()
        await _welcome_back_if_away(self.profile)

    async def disconnect(self, code):
        if getattr(self, "off_record", None) is not None:  # P5: the page closed: it ends here
            self.off_record.end()
            self.off_record = None
        if getattr(self, "turns", None):
            # A reply under way still finishes and is archived (nothing lost), page or not.
            await asyncio.wait(set(self.turns), timeout=TURN_DRAIN_SECONDS)
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if getattr(self, "session_group", None):
            await self.channel_layer.group_discard(self.session_group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        steps.begin()
        with frame_arrived():  # this frame's database calls, and its turn's, are due from now
            await self._receive(text_data, bytes_data)

    async def _receive(self, text_data, bytes_data):
        if not await self._within_limits(text_data, bytes_data):
            return
        try:
            data = json.loads(text_data or "")
        except (ValueError, RecursionError):
            data = None
        problem = frame_problem(data)
        if problem is not None:
            await self.send_html(turn.notice(problem, lang=self.profile.language))
            return
        turn.vector_ahead(data)
        action = data.get("action") or "send"
        handler = self._line_handler(action)
        previous = self.turn_over
        at_once = handler is not None and (previous is None or previous.is_set())
        # Logged out since the socket opened (S5)? A line that can take the profile's turn now
        # takes it in the same database call: one wait for the database thread, not two (BENCH §4).
        alive, coming = await self._checked(take_turn=at_once)
        steps.step("checked")
        if not alive:
            await self.close(code=4401)
            return
        if at_once:
            if coming is None:  # another tab's turn holds the profile
                await self._refuse_busy(action, data)
                return
            self.turn_over = over = asyncio.Event()
            self._start(self._run_turn(handler, data, over, coming))
            return
        if action == "typing":  # a line is coming: background model work gives way now (issue 26)
            gate.typing()
            return
        if action == "stop":
            await self._stop_turn()
            return
        if action in ("resync", "choose"):
            self._start(self._run_quick(action, data))
            return
        if action in ("off_start", "off_end"):
            await self._off_record(action)
            return
        if handler is None:
            await self._refuse_line(action, data)
            return
        # This socket's own turn (or a line queued behind it) still holds the profile: the line
        # waits for it rather than being refused (issue 25 point 1, S3).
        if self.waiting >= MAX_WAITING_LINES:
            await self._refuse_busy(action, data)
            return
        self.waiting += 1
        self.turn_over = over = asyncio.Event()
        self._start(self._run_after(previous, over, handler, action, data))

    def _line_handler(self, action: str):
        """The handler of a line (a turn) this socket may take now, or None: an off-the-record
        line on a page that is off the record (P5), an archived one on a page that is not."""
        if self.off_record is not None:
            return functools.partial(OFF_ACTIONS[action], off=self.off_record) if action in OFF_ACTIONS else None
        return TURN_ACTIONS.get(action)

    async def _refuse_line(self, action: str, data: dict) -> None:
        """Why a line has no handler (`_line_handler`), told on the page."""
        if action in OFF_ACTIONS:  # ended, or this socket never began it (a reconnect)
            await self._refuse_off(action, data)
        elif action in TURN_ACTIONS:
            # Nothing said while the page is off the record may reach the archive by mistake.
            await self.send_html(turn.notice(
                gettext_lazy("This page is off the record: end it to talk on the record again."),
                lang=self.profile.language))
        else:
            await self.send_html(turn.notice(
                format_lazy(gettext_lazy("Unknown action: {action}"), action=action), lang=self.profile.language
            ))

    # --- guardrails (S3): frame size and rate; one turn per profile ------------------------------

    async def _within_limits(self, text_data, bytes_data) -> bool:
        """Refuse (drop, with a notice) a frame over the size limit or over the rate."""
        size = self.limiter.too_large(text_data, bytes_data)
        if size:
            await self.send_html(turn.notice(format_lazy(
                gettext_lazy("Frame refused: {size} bytes, the limit is {limit} (PREVIOUSLY_WS_MAX_FRAME_BYTES). Nothing was sent."),
                size=size, limit=self.limiter.max_bytes,
            ), lang=self.profile.language))
            return False
        if self.limiter.too_fast():
            if self.limiter.should_notice():
                await self.send_html(turn.notice(format_lazy(
                    gettext_lazy("Too many frames: at most {frames} in {seconds} seconds. Frames over the limit were dropped; wait a moment."),
                    frames=self.limiter.rate_frames, seconds=self.limiter.rate_seconds,
                ), lang=self.profile.language))
            return False
        return True

    async def _refuse_busy(self, action: str, data: dict) -> None:
        """Another turn of this profile is in flight (this tab or another): nothing is archived;
        a sent line goes back into the composer."""
        html = turn.notice(
            gettext_lazy("Your companion is still answering (here or in another tab). Stop that reply or wait, then send again."),
            lang=self.profile.language,
        )
        if action == "send":
            html = self._given_back(data) + html
        await self.send_html(html)

    def _given_back(self, data: dict) -> str:
        """A refused line off the page's list, its text back in the composer (S3)."""
        return turn.render("busy", mid=str(data.get("mid") or ""), text=str(data.get("text") or "")[: limits.MESSAGE.chars],
                           lang=self.profile.language)

    async def _off_record(self, action: str) -> None:
        """P5: begin (afresh) or end this socket's off-the-record conversation."""
        if self.off_record is not None:
            self.off_record.end()
            self.off_record = None
        if action == "off_start":
            self.off_record = off_record.OffRecord()
            await self.send_html(off_record.started(self.profile))
        else:
            await self.send_html(off_record.ended(self.profile))

    async def _refuse_off(self, action: str, data: dict) -> None:
        """An off-the-record frame with no conversation on this socket: nothing is archived,
        the line's text goes back to the composer, and the page leaves off the record."""
        html = off_record.ended(self.profile, lost=True)
        if action == "off_send":
            html = self._given_back(data) + html
        await self.send_html(html)

    async def _stop_turn(self) -> None:
        """U2: stop the profile's reply in flight, in this process or (through the group) another."""
        if not guard.Running.stop(self.profile.pk):
            await self.channel_layer.group_send(self.group, {"type": "turn.stop"})

    async def turn_stop(self, event):
        guard.Running.stop(self.profile.pk)

    def _start(self, coroutine) -> None:
        task = asyncio.create_task(coroutine)
        self.turns.add(task)
        task.add_done_callback(self.turns.discard)

    async def _run_quick(self, action: str, data: dict) -> None:
        """A resync or the choice of an alternative (U2): no model call, no turn lease."""
        handler = turn.handle_resync if action == "resync" else turn.handle_choose
        async with self.turn_lock:
            try:
                await handler(self.profile, data, self.send_html)
            except Exception:
                log.exception("%s failed for profile %s", action, self.profile.pk)

    async def _run_after(self, previous: asyncio.Event, over: asyncio.Event, handler, action: str, data: dict) -> None:
        """A line sent while this socket's turn held the profile: taken up when that turn lets
        go of it (its reply is archived), in the order the lines were sent."""
        try:
            await previous.wait()
            coming = await self._take_turn()
        finally:
            self.waiting -= 1
        if coming is None:  # another tab took the profile in between: its text goes back
            over.set()
            await self._refuse_busy(action, data)
            return
        await self._run_turn(handler, data, over, coming)

    async def _checked(self, *, take_turn: bool, session: bool = True) -> tuple[bool, WritesComing | None]:
        """The session check (S5; none when `session` is false) and, when `take_turn` and the
        check passes, the profile's turn lease (S3), in one database call (`_alive_taking_turn`).
        Returns (alive, coming). `coming` is the turn's writes, announced from before the lease
        was asked for and ending when its reply is archived: an import between two batches lets
        them in first, so the turn waits for one part of a batch at most, once
        (memory.sqlite.waiting; S4, BENCH §5). It is None when the lease was not asked for or
        another turn holds it."""
        coming = WritesComing()
        if take_turn:
            coming.start()
        try:
            alive, taken = await _alive_taking_turn(self.scope if session else None,
                                                    self.profile if take_turn else None)
        except BaseException:
            coming.end()
            raise
        if taken:
            return alive, coming
        coming.end()
        return alive, None

    async def _take_turn(self) -> WritesComing | None:
        """The lease alone (`_checked`), for a line that waited behind this socket's own turn: its
        session was checked as it arrived."""
        _, coming = await self._checked(take_turn=True, session=False)
        return coming

    async def _run_turn(self, handler, data: dict, over: asyncio.Event, coming: WritesComing) -> None:
        """The turn, its lease taken; `coming` (`_take_turn`) ends when its reply is archived, and
        pauses while the model streams (guard.writes_paused)."""
        stop = guard.Running.start(self.profile.pk)
        keeper = asyncio.create_task(guard.keep_turn(self.profile, renew_turn))
        released = False

        async def release(freed: bool = False) -> None:
            nonlocal released
            if not released:
                released = True
                coming.end()
                keeper.cancel()
                guard.Running.finish(self.profile.pk, stop)
                try:
                    if not freed:  # else the reply's own transaction let go of the lease
                        await release_turn(self.profile)
                finally:
                    over.set()  # a line waiting behind this turn may take the profile now

        guard.set_on_archived(release)  # this task's context only
        guard.set_turn_writes(coming)
        try:
            async with self.turn_lock:
                await handler(self.profile, data, self.send_html, stop=stop)
        except Exception:
            log.exception("turn failed for profile %s", self.profile.pk)
            await self.send_html(turn.notice(
                gettext_lazy("Something went wrong with that message; it is saved if it was shown."),
                lang=self.profile.language,
            ))
        finally:
            await release()

    async def send_html(self, html: str) -> None:
        try:
            await self.send(text_data=html)
        except Exception:  # the page went away mid-turn; the turn still finishes and archives
            log.info("page of profile %s closed before a frame could be sent", self.profile.pk)

    async def session_ended(self, event):
        """`{"type": "session.ended"}`: this session was signed out (O5); the page's socket closes."""
        await self.close(code=4401)

    async def page_event(self, event):
        """`{"type": "page.event", "html": …}` from the profile's group: pass it to the page."""
        await self.send(text_data=event["html"])
