"""The chat websocket (STYLE 8: a view for sockets): authenticate, parse the frame, hand it on.

Channel-layer group: ``profile-<profile pk>`` (see `group_name`). Background work (card
evolution, …) pushes to the page with
``channel_layer.group_send(group_name(profile), {"type": "page.event", "html": "<…hx-swap-oob…>"})``;
the html is sent as is and htmx swaps it out-of-band. That is the only event type handled.
"""

import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from memory.models import Profile
from previously.chat import turn

log = logging.getLogger(__name__)


def group_name(profile: Profile | int) -> str:
    """The channel-layer group of a profile's open chat pages."""
    return f"profile-{profile if isinstance(profile, int) else profile.pk}"


@database_sync_to_async
def _owned_profile(user, key: str) -> Profile | None:
    return Profile.objects.for_user(user).filter(key=key).first()


class ChatConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.profile = await _owned_profile(user, self.scope["url_route"]["kwargs"]["profile_key"])
        if self.profile is None:  # not this user's profile (P2): same answer as a missing one
            await self.close(code=4403)
            return
        self.group = group_name(self.profile)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        try:
            data = json.loads(text_data or "")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            await self.send_html(turn.notice("Unreadable frame: expected JSON."))
            return
        action = data.get("action") or "send"
        if action == "send":
            await turn.handle_send(self.profile, data, self.send_html)
        elif action == "retry":
            await turn.handle_retry(self.profile, data, self.send_html)
        else:
            await self.send_html(turn.notice(f"Unknown action: {action}"))

    async def send_html(self, html: str) -> None:
        await self.send(text_data=html)

    async def page_event(self, event):
        """`{"type": "page.event", "html": …}` from the profile's group: pass it to the page."""
        await self.send(text_data=event["html"])
