"""Reconnect and resync (issue 9): the page asks for the lines after the last one it shows;
across a Redis restart under the channel layer nothing is lost or duplicated."""

import asyncio
import contextlib
import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers, get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from memory.archive import archive_message
from previously.push import profile_group
from previously.routing import websocket_urlpatterns
from previously.settings import redis_channel_layer
from tests.previously.chat.conftest import new_mid
from tests.services import RedisServer

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def archive(profile, n: int, text: str):
    return archive_message(profile=profile, mid=new_mid(n), speaker="user", content=text).message


async def frames(chat, *, quiet: float = 0.3) -> list[str]:
    out = []  # receive_nothing, not a timeout: a timed-out receive cancels the consumer
    while not await chat.ws.receive_nothing(timeout=quiet):
        out.append(await chat.ws.receive_from())
    return out


async def test_resync_sends_exactly_the_lines_after_the_last_one_shown(connect, user, profile):
    for n in range(1, 6):
        await archive(profile, n, f"line {n}")
    chat = await connect(user)
    await chat.ws.send_to(text_data=json.dumps({"action": "resync", "after": new_mid(2)}))
    got = await frames(chat)
    assert [f for f in got if "msg-c_" in f] == got and len(got) == 3
    for n, frame in zip(range(3, 6), got, strict=True):
        assert f'id="msg-{new_mid(n)}"' in frame and f"line {n}" in frame and 'hx-swap-oob="true"' in frame


async def test_resync_with_an_unknown_or_foreign_mid_sends_nothing(connect, user, profile):
    await archive(profile, 1, "mine")
    chat = await connect(user)
    for after in ("c_ffffffffffffffff", ""):
        await chat.ws.send_to(text_data=json.dumps({"action": "resync", "after": after}))
    assert await frames(chat) == []
    # Not an id at all: refused by the frame check with a notice naming the field (S5).
    await chat.ws.send_to(text_data=json.dumps({"action": "resync", "after": "x' OR 1=1"}))
    got = await frames(chat)
    assert len(got) == 1 and "“after” is not a message id" in got[0] and "msg-" not in got[0]


@pytest.fixture
def redis_layer(settings):
    """The channel layer on a redis-server of this test's own (restartable)."""
    server = RedisServer().start()
    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(server.url)}
    channel_layers.backends.clear()
    yield server
    server.stop()
    channel_layers.backends.clear()


async def test_a_redis_restart_loses_and_duplicates_nothing_after_reconnect(redis_layer, connect, user, profile):
    await archive(profile, 1, "before the outage")
    page = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/chat/owner/")
    page.scope["user"] = user
    assert (await page.connect())[0]
    await get_channel_layer().group_send(profile_group(profile), {"type": "page.event", "html": "<p>event 1</p>"})
    assert "event 1" in await page.receive_from(timeout=5)

    redis_layer.stop()  # Redis goes away: page events cannot travel; the archive is the database
    with contextlib.suppress(Exception):  # the consumer dies with its layer connection: the page sees a close
        await page.wait(timeout=5)
        await page.disconnect()
    await archive(profile, 2, "during the outage (another tab)")
    await archive(profile, 3, "still during the outage")
    redis_layer.start()  # same port
    channel_layers.backends.clear()  # a restarted process starts with fresh connections

    again = await connect(user)  # the htmx ws extension reconnects by itself
    assert not isinstance(again, int), f"reconnect refused: {again}"
    await again.ws.send_to(text_data=json.dumps({"action": "resync", "after": new_mid(1)}))
    got = [await again.ws.receive_from(timeout=10) for _ in range(2)]
    assert await again.ws.receive_nothing(timeout=0.5)
    assert [new_mid(2) in f for f in got] == [True, False] and new_mid(3) in got[1]
    await get_channel_layer().group_send(profile_group(profile), {"type": "page.event", "html": "<p>event 2</p>"})
    assert "event 2" in await again.ws.receive_from(timeout=5)


async def test_an_idle_page_on_the_redis_layer_stays_connected(redis_layer, user, profile):
    """Nothing to receive for longer than the layer's blocking pop (5 s) is normal for a page
    open on a quiet chat: the socket stays up and the next page event arrives (was a 1011 close
    with redis-py 8's default 5 s read timeout, BENCH §4)."""
    page = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/chat/owner/")
    page.scope["user"] = user
    assert (await page.connect())[0]
    assert await page.receive_nothing(timeout=7)  # no close frame, no error
    await get_channel_layer().group_send(profile_group(profile), {"type": "page.event", "html": "<p>still here</p>"})
    assert "still here" in await page.receive_from(timeout=5)
    await page.disconnect()


async def test_many_pages_joining_at_once_all_get_a_redis_connection(redis_layer):
    """200 pages opening at once on one process each join their group concurrently; redis-py's
    default pool of 100 connections refused the rest (HTTP 500 on the socket, BENCH §4)."""
    layer = get_channel_layer()
    channels = [await layer.new_channel() for _ in range(300)]
    await asyncio.gather(*(layer.group_add(f"profile-{n}", name) for n, name in enumerate(channels)))
    await layer.group_send("profile-299", {"type": "page.event", "html": "<p>last</p>"})
    assert (await layer.receive(channels[-1]))["html"] == "<p>last</p>"
