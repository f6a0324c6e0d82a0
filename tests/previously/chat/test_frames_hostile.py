"""Issue 16 points 5 and 6 (SPEC S5): every socket frame shape gets a clear refusal and the
socket stays open (never a TypeError that drops it); a socket whose session logged out is
closed at its next frame; websocket origins must match scheme, host and port."""

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from memory.models import Message, Profile
from previously.asgi import application
from previously.origins import same_origin
from tests import factories as f
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(("frame", "said"), [
    ('{"action": {"a": 1}}', "“action” must be text"),
    ('["send"]', "expected JSON"),
    ('"send"', "expected JSON"),
    ("[" * 1_200_000, "Frame refused"),  # the size limit (S3) refuses it before any parse
    ("[" * 100_000, "expected JSON"),  # under it: the parse fails (too deep), a clear notice
    ('{"action": "send", "mid": ["c_0000000000000001"], "text": "hi"}', "“mid” must be text"),
    ('{"action": "send", "mid": "c_0000000000000001", "text": {"x": 1}}', "“text” must be text"),
    ('{"action": "send", "mid": "c_0000000000000001", "text": "bad \\ud800"}', "cannot be stored"),
    ('{"action": "send", "mid": "c_0000000000000001", "text": "bad \\u0000"}', "cannot be stored"),
    ('{"action": "retry", "mid": "a/b"}', "“mid” is not a message id"),
    ('{"action": "resync", "after": "c_1\\n# x"}', "“after” is not a message id"),
    ('{"action": "send", "mid": "c_0000000000000001", "text": "hi", "tz": 8}', "“tz” must be text"),
    ('{"action": 3}', "“action” must be text"),
])
async def test_every_malformed_frame_shape_gets_a_clear_notice_and_the_socket_stays(connect, profile, frame, said):
    chat = await connect(profile.user)
    await chat.ws.send_to(text_data=frame)
    answer = await chat.ws.receive_from(timeout=5)
    assert said in answer
    await chat.send("still here", mid=new_mid(9))  # the same socket still takes a good frame
    assert await chat.ws.receive_from(timeout=5)
    assert not await sync_to_async(Message.objects.filter(content__startswith="bad ").exists)()


def _login(username="dora"):
    user = f.UserFactory(username=username)
    f.ProfileFactory(user=user, key="owner", language="en")
    c = Client()
    c.force_login(user)
    return c


async def _socket_of(client) -> WebsocketCommunicator:
    """The chat socket of a logged-in test client, through the whole ASGI stack (its session)."""
    sid = client.cookies["sessionid"].value
    headers = [(b"cookie", f"sessionid={sid}".encode()), (b"host", b"127.0.0.1:8000"),
               (b"origin", b"http://127.0.0.1:8000")]
    communicator = WebsocketCommunicator(application, "/ws/chat/owner/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def test_a_socket_is_closed_at_its_next_frame_once_its_session_logged_out():
    client = await sync_to_async(_login)()
    communicator = await _socket_of(client)
    await sync_to_async(client.post)("/logout/")
    await communicator.send_to(text_data=json.dumps({"action": "send", "mid": new_mid(1), "text": "after logout"}))
    out = await communicator.receive_output(timeout=5)
    assert out == {"type": "websocket.close", "code": 4401}
    assert not await sync_to_async(Message.objects.filter(content="after logout").exists)()
    # The check and the turn's lease are one database call (BENCH §4): a refused frame takes no
    # lease, which would hold the profile's next line for TURN_LEASE (S3).
    assert await sync_to_async(Profile.objects.filter(key="owner", turn_until__isnull=False).exists)() is False
    await communicator.disconnect()


async def test_a_websocket_from_the_same_host_on_another_port_or_scheme_is_refused():
    client = await sync_to_async(_login)("erin")
    sid = client.cookies["sessionid"].value
    for origin, ok in ((b"http://127.0.0.1:9999", False), (b"https://127.0.0.1:8000", False),
                       (b"http://127.0.0.1:8000", True), (b"http://localhost:8000", False)):
        headers = [(b"cookie", f"sessionid={sid}".encode()), (b"host", b"127.0.0.1:8000"), (b"origin", origin)]
        communicator = WebsocketCommunicator(application, "/ws/chat/owner/", headers=headers)
        connected, _ = await communicator.connect()
        assert connected is ok, origin
        await communicator.disconnect()


@pytest.mark.parametrize(("scope", "ok"), [
    ({"scheme": "ws", "headers": [(b"host", b"[::1]:8000"), (b"origin", b"http://[::1]:8000")]}, True),
    ({"scheme": "wss", "headers": [(b"host", b"example.com"), (b"origin", b"https://example.com")]}, True),
    ({"scheme": "wss", "headers": [(b"host", b"example.com"), (b"origin", b"http://example.com")]}, False),
    ({"scheme": "ws", "headers": [(b"host", b"example.com"), (b"origin", b"null")]}, False),
    ({"scheme": "ws", "headers": [(b"host", b"example.com")]}, False),
    ({"scheme": "ws", "headers": [(b"host", b"example.com"), (b"origin", b"http://example.com:80")]}, True),
])
def test_same_origin_compares_scheme_host_and_port(scope, ok):
    assert same_origin({"type": "websocket", **scope}) is ok


def test_a_trusted_origin_behind_a_proxy_is_taken(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.org"]
    scope = {"type": "websocket", "scheme": "ws",
             "headers": [(b"host", b"127.0.0.1:8001"), (b"origin", b"https://chat.example.org")]}
    assert same_origin(scope)


async def test_a_socket_is_closed_at_its_next_frame_once_its_password_changed():
    """Issue 24 point 9: the session's auth hash is checked on each frame, as HTTP checks it."""
    client = await sync_to_async(_login)("fay")
    communicator = await _socket_of(client)

    def change_password():
        user = f.UserFactory._meta.model.objects.get(username="fay")
        user.set_password("a-new-password-123")
        user.save()

    await sync_to_async(change_password)()
    await communicator.send_to(text_data=json.dumps({"action": "send", "mid": new_mid(1), "text": "after the change"}))
    out = await communicator.receive_output(timeout=5)
    assert out == {"type": "websocket.close", "code": 4401}
    assert not await sync_to_async(Message.objects.filter(content="after the change").exists)()
    await communicator.disconnect()
