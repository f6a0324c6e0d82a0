"""D6: a line deleted for good cannot come back with the same mid — not over the socket (a
client retry, a second device's queue) and not through the image upload / no-JS form."""

import base64

import pytest
from channels.db import database_sync_to_async

from memory.archive import archive_message
from memory.deletion import delete_message
from memory.models import Message
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@database_sync_to_async
def said_and_deleted(profile, mid, text):
    archive_message(profile=profile, mid=mid, speaker="user", content=text)
    delete_message(profile=profile, mid=mid, hard=True, force=True)


async def test_a_resent_deleted_mid_over_the_socket_is_refused(connect, user, profile, llm_server, llm_provider):
    mid = new_mid(5)
    await said_and_deleted(profile, mid, "forget this please 🙈")
    chat = await connect(user)
    await chat.send("forget this please 🙈", mid=mid)
    frame = await chat.ws.receive_from()
    assert "was deleted for good; it is not stored again" in frame and 'hx-swap-oob="delete"' in frame
    assert await chat.ws.receive_nothing()
    assert not await database_sync_to_async(Message.objects.filter(mid=mid).exists)()
    assert llm_server.requests == []


def test_a_deleted_mid_cannot_come_back_through_the_upload(client, user, profile, tmp_path, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.MEDIA_ROOT = str(tmp_path)
    mid = "c_00000000000000b7"
    archive_message(profile=profile, mid=mid, speaker="user", content="a photo I regret")
    delete_message(profile=profile, mid=mid, hard=True, force=True)
    client.force_login(user)
    response = client.post("/chat/image/", {"mid": mid, "text": "a photo I regret",
                                            "image": SimpleUploadedFile("x.png", PNG, content_type="image/png")})
    assert response.status_code == 410 and "deleted for good" in response.content.decode()
    assert not Message.objects.filter(mid=mid).exists()
    assert not list(tmp_path.rglob("*.png"))  # no file written either
