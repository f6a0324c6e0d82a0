"""The chat websocket (STYLE 8: a view for sockets): authenticate, parse the frame, hand it on.

Each socket joins its profile's group (`previously.push.profile_group`). Background work
(card evolution, proactive lines, …) pushes to the page with `previously.push.push(profile,
html)` — a ``{"type": "page.event", "html": "<…hx-swap-oob…>"}`` message; the html is sent as
is and htmx swaps it out-of-band. That is the only event type handled.
"""

import asyncio
import json
import logging
from importlib import import_module

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy

from memory.models import Profile
from memory.models.archive import OBJECT_ID_RE
from previously.chat import turn
from previously.chat.db import db_call
from previously.chat.proactive import should_welcome_back, welcome_back_task
from previously.push import profile_group

log = logging.getLogger(__name__)
TURN_DRAIN_SECONDS = 120


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


@db_call
def _session_alive(scope) -> bool:
    """S5: the socket's login session still exists for its user (logout flushes it)."""
    session = scope.get("session")
    if session is None or not getattr(session, "session_key", None):
        return True  # no cookie session (in-process test scopes): nothing to re-check
    fresh = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session.session_key)
    return str(fresh.get(SESSION_KEY)) == str(scope["user"].pk)


class ChatConsumer(AsyncWebsocketConsumer):
    """Turns run as tasks, one at a time per socket, so page events (card evolution progress,
    K11) reach the page while a reply is still streaming."""

    async def connect(self):
        self.turn_lock = asyncio.Lock()
        self.turns: set[asyncio.Task] = set()
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
        await self.accept()
        await _welcome_back_if_away(self.profile)

    async def disconnect(self, code):
        if getattr(self, "turns", None):
            # A reply under way still finishes and is archived (nothing lost), page or not.
            await asyncio.wait(set(self.turns), timeout=TURN_DRAIN_SECONDS)
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        try:
            data = json.loads(text_data or "")
        except (ValueError, RecursionError):
            data = None
        problem = frame_problem(data)
        if problem is not None:
            await self.send_html(turn.notice(problem, lang=self.profile.language))
            return
        if not await _session_alive(self.scope):  # logged out since the socket opened
            await self.close(code=4401)
            return
        action = data.get("action") or "send"
        handler = {
            "send": turn.handle_send,
            "retry": turn.handle_retry,
            "resync": turn.handle_resync,
            "reply": turn.handle_reply,
        }.get(action)
        if handler is None:
            await self.send_html(turn.notice(
                format_lazy(gettext_lazy("Unknown action: {action}"), action=action), lang=self.profile.language
            ))
            return
        task = asyncio.create_task(self._run_turn(handler, data))
        self.turns.add(task)
        task.add_done_callback(self.turns.discard)

    async def _run_turn(self, handler, data: dict) -> None:
        async with self.turn_lock:
            try:
                await handler(self.profile, data, self.send_html)
            except Exception:
                log.exception("turn failed for profile %s", self.profile.pk)
                await self.send_html(turn.notice(
                    gettext_lazy("Something went wrong with that message; it is saved if it was shown."),
                    lang=self.profile.language,
                ))

    async def send_html(self, html: str) -> None:
        try:
            await self.send(text_data=html)
        except Exception:  # the page went away mid-turn; the turn still finishes and archives
            log.info("page of profile %s closed before a frame could be sent", self.profile.pk)

    async def page_event(self, event):
        """`{"type": "page.event", "html": …}` from the profile's group: pass it to the page."""
        await self.send(text_data=event["html"])
