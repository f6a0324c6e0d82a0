"""Pushing HTML to a profile's open pages (below chat and agent, so neither imports the other
to talk to the browser).

Every page of one profile joins the channel-layer group ``profile-<pk>``; the chat consumer
forwards a ``{"type": "page.event", "html": …}`` message on it to the page as is, where htmx
swaps it out-of-band. Extra keys (evolution events carry ``event``, ``run_id``, ``status``) ride
along for listeners that want them.
"""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from memory.models import Profile

PAGE_EVENT = "page.event"


def profile_group(profile: Profile | int) -> str:
    """The channel-layer group every open page of one profile listens on."""
    return f"profile-{profile if isinstance(profile, int) else profile.pk}"


def page_event(html: str, **extra) -> dict:
    """The channel-layer message that carries `html` to a profile's pages."""
    return {"type": PAGE_EVENT, "html": html, **extra}


async def apush(profile: Profile | int, html: str, **extra) -> dict:
    """Send `html` to the profile's open pages (from async code); returns the message sent."""
    message = page_event(html, **extra)
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(profile_group(profile), message)
    return message


def push(profile: Profile | int, html: str, **extra) -> dict:
    """`apush` from sync code (tasks, the evolution run, proactive sends); raises what the
    channel layer raises — callers decide whether a missed frame matters."""
    return async_to_sync(apush)(profile, html, **extra)


SESSION_ENDED = "session.ended"


def session_group(session_key: str) -> str:
    """The channel-layer group of the chat sockets opened with one signed-in session (O5)."""
    return f"session-{session_key}"


def end_sessions(session_keys) -> None:
    """Close the chat sockets of the sessions named (signed out elsewhere, O5)."""
    layer = get_channel_layer()
    if layer is None:
        return
    for key in session_keys:
        async_to_sync(layer.group_send)(session_group(key), {"type": SESSION_ENDED})
