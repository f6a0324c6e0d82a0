"""Image messages (SPEC A7): upload checked by content, stored through the storage API,
thumbnails served only to their owner, the image part reaching the model, deleted with
the message."""

import base64
import io
import time

import pytest
from channels.db import database_sync_to_async
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from memory.deletion import hard_delete_message
from memory.models import Message
from previously.chat import db, guard, turn
from previously.llm import reset_provider
from previously.llm.openai_compat import OpenAICompatible
from tests.factories import MessageFactory, ProfileFactory, UserFactory
from tests.llm_server import Turn
from tests.previously.chat.conftest import new_mid


def png(width=40, height=30, color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def jpeg(width=800, height=600) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 120, 200)).save(out, "JPEG")
    return out.getvalue()


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    """Uploads go to a fresh MEDIA_ROOT (default_storage follows the setting)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


def upload(client, data: bytes, *, name="photo.png", mid=None, text="", htmx=True):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(
        reverse("chat_image_upload"),
        {"image": SimpleUploadedFile(name, data, content_type="image/png"), "mid": mid or new_mid(1),
         "text": text, "tz": "Asia/Shanghai"},
        headers=headers,
    )


@pytest.mark.django_db
def test_a_real_png_is_stored_archived_as_an_image_message_and_shown_as_a_thumbnail(logged_in, profile, media):
    data = png()
    response = upload(logged_in, data, text="my cat")
    assert response.status_code == 201
    message = Message.objects.get(profile=profile, mid=new_mid(1))
    assert message.message_type == "image" and message.speaker == "user" and message.content == "my cat"
    a = message.attachment
    assert (a["content_type"], a["size"], a["width"], a["height"], a["name"]) == ("image/png", len(data), 40, 30, "photo.png")
    assert len(a["sha256"]) == 64
    assert default_storage.exists(a["path"]) and default_storage.exists(a["thumb"])
    assert a["path"].startswith(f"images/{profile.pk}/")
    html = response.content.decode()
    assert f'src="/images/{message.pk}/thumb/"' in html and "my cat" in html
    page = logged_in.get(reverse("home")).content.decode()
    assert f'src="/images/{message.pk}/thumb/"' in page  # the archive shows it after a reload too


@pytest.mark.django_db
def test_the_thumbnail_is_a_small_jpeg_and_the_full_image_is_the_reencoded_original(logged_in, profile):
    data = jpeg(1600, 1200)
    upload(logged_in, data, name="big.jpg")
    message = Message.objects.get(mid=new_mid(1))
    thumb = logged_in.get(reverse("chat_image_thumb", args=[message.pk]))
    assert thumb.status_code == 200 and thumb["Content-Type"] == "image/jpeg"
    with Image.open(io.BytesIO(b"".join(thumb.streaming_content))) as image:
        assert image.format == "JPEG" and max(image.size) <= 320
    full = logged_in.get(reverse("chat_image", args=[message.pk]))
    body = b"".join(full.streaming_content)
    assert full["Content-Type"] == "image/jpeg" and full["X-Content-Type-Options"] == "nosniff"
    assert full["Content-Disposition"] == 'inline; filename="image.jpeg"'
    with Image.open(io.BytesIO(body)) as image:  # S4: decoded and written again, same picture
        assert (image.format, image.size) == ("JPEG", (1600, 1200))
    assert len(body) == message.attachment["size"]
    assert "private" in full["Cache-Control"]


@pytest.mark.django_db
def test_a_text_file_named_png_is_refused_by_content(logged_in, profile, media):
    response = upload(logged_in, b"just some text, not a picture\n" * 20, name="fake.png")
    assert response.status_code == 400 and "not an image" in response.content.decode()
    assert not Message.objects.exists()
    assert not any(media.rglob("*.*")) if media.exists() else True


@pytest.mark.django_db
def test_an_image_over_the_size_limit_is_refused(logged_in, profile, settings):
    settings.PREVIOUSLY_IMAGE_MAX_BYTES = 1000
    response = upload(logged_in, jpeg(), name="photo.jpg")
    assert response.status_code == 413 and "too large" in response.content.decode()
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_a_bad_mid_and_a_missing_file_are_refused(logged_in, profile):
    assert upload(logged_in, png(), mid="nope").status_code == 400
    response = logged_in.post(reverse("chat_image_upload"), {"mid": new_mid(2)})
    assert response.status_code == 400 and "no image" in response.content.decode()


@pytest.mark.django_db
def test_a_resent_upload_is_idempotent_and_a_different_caption_conflicts_a2(logged_in, profile, media):
    assert upload(logged_in, png(), text="same").status_code == 201
    assert upload(logged_in, png(), text="same").status_code == 200
    assert upload(logged_in, png(), text="other").status_code == 409
    assert Message.objects.count() == 1
    assert len([p for p in media.rglob("*") if p.is_file()]) == 2  # one file + its thumbnail


@pytest.mark.django_db(transaction=True)  # the turn's async ORM helpers close the thread's connection
def test_without_javascript_the_upload_redirects_and_the_reply_is_there_at_the_next_load(logged_in, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["Nice ", "picture."]))
    response = upload(logged_in, png(), htmx=False, text="from a plain form")
    assert response.status_code == 302
    assert list(Message.objects.values_list("speaker", "message_type", "content")) == [
        ("user", "image", "from a plain form"), ("assistant", "text", "Nice picture."),
    ]
    assert "Nice picture." in logged_in.get(reverse("home")).content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_background_reply_takes_the_profiles_turn_and_gives_it_back_s3(logged_in, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["Seen."]))
    upload(logged_in, png(), htmx=False)
    profile.refresh_from_db()
    assert profile.turn_until is None  # released after the reply
    assert len(llm_server.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_the_background_reply_leaves_its_thread_calls_that_are_due_when_made(logged_in, profile, llm_server, llm_provider):
    """The turn marks its own calls after the reply as giving way (`after_the_reply`); the task
    thread it ran on (here the test's: the tasks run at once) keeps no such mark for later ones."""
    llm_server.script(Turn(chunks=["Seen."]))
    upload(logged_in, png(), htmx=False)
    assert len(llm_server.requests) == 1
    assert db._deadline() <= time.monotonic()  # due when made, not LATER_SECONDS on


@pytest.mark.django_db(transaction=True)
def test_the_background_reply_waits_for_a_turn_in_flight_and_never_runs_two_s3(
        logged_in, profile, llm_server, llm_provider, monkeypatch):
    monkeypatch.setattr(turn, "BACKGROUND_TURN_WAIT", 0.0)
    assert guard.take_turn(profile)  # a reply streaming in another tab
    llm_server.script(Turn(chunks=["Should not be asked."]))
    response = upload(logged_in, png(), htmx=False, text="while busy")
    assert response.status_code == 302
    assert list(Message.objects.values_list("speaker", "content")) == [("user", "while busy")]
    assert llm_server.requests == []
    guard.release_turn(profile)


@pytest.mark.django_db
def test_the_upload_needs_a_login_and_a_csrf_token(client, profile):
    assert upload(client, png()).status_code == 302  # to the login page
    strict = type(client)(enforce_csrf_checks=True)
    strict.force_login(profile.user)
    assert upload(strict, png()).status_code == 403


@pytest.mark.django_db
def test_another_user_cannot_fetch_the_image_p2(logged_in, profile, client):
    upload(logged_in, png())
    message = Message.objects.get(mid=new_mid(1))
    mallory = UserFactory()
    ProfileFactory(user=mallory, key="owner")
    client.force_login(mallory)
    assert client.get(reverse("chat_image", args=[message.pk])).status_code == 404
    assert client.get(reverse("chat_image_thumb", args=[message.pk])).status_code == 404


@pytest.mark.django_db
def test_a_legacy_image_without_its_file_shows_a_placeholder(logged_in, profile):
    legacy = MessageFactory(
        profile=profile, message_type="image", content="",
        attachment={"name": "cat.jpg", "mime": "image/jpeg", "size": 48213, "width": 800, "height": 600},
    )
    page = logged_in.get(reverse("home")).content.decode()
    assert "Image file not migrated" in page and "cat.jpg" in page
    assert logged_in.get(reverse("chat_image", args=[legacy.pk])).status_code == 404


@pytest.mark.django_db
def test_hard_delete_removes_the_file_and_its_thumbnail_d2(logged_in, profile, django_capture_on_commit_callbacks):
    upload(logged_in, png())
    message = Message.objects.get(mid=new_mid(1))
    paths = [message.attachment["path"], message.attachment["thumb"]]
    with django_capture_on_commit_callbacks(execute=True):
        hard_delete_message(message)
    assert not Message.objects.exists()
    assert not any(default_storage.exists(p) for p in paths)


# --- the model sees the image (or its stand-in) -----------------------------------------------


@database_sync_to_async
def _upload_as(user, data, mid, text):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return upload(client, data, mid=mid, text=text).status_code


@pytest.mark.django_db(transaction=True)
async def test_the_model_request_carries_the_image_as_a_content_part(connect, user, profile, llm_server, llm_provider):
    data = png()
    assert await _upload_as(user, data, new_mid(5), "what colour is this?") == 201
    chat = await connect(user)
    await chat.ws.send_json_to({"action": "reply", "mid": new_mid(5)})
    frames = await chat.frames_until_reply()
    assert "Hello there!" in frames[-1]
    last = llm_server.requests[-1]["messages"][-1]
    assert last["role"] == "user"
    text, image = last["content"]
    assert text == {"type": "text", "text": "what colour is this?"}
    assert image["type"] == "image_url"
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(data).decode()
    # A second ask for the same line shows the stored reply and calls no model (idempotent).
    await chat.ws.send_json_to({"action": "reply", "mid": new_mid(5)})
    again = [await chat.ws.receive_from(), await chat.ws.receive_from()]
    assert "what colour is this?" in again[0] and "Hello there!" in again[1]
    assert await chat.ws.receive_nothing()
    assert len(llm_server.requests) == 1
    rows = await database_sync_to_async(lambda: list(Message.objects.values_list("speaker", "message_type")))()
    assert rows == [("user", "image"), ("assistant", "text")]


@pytest.mark.django_db(transaction=True)
async def test_a_provider_without_images_gets_a_text_stand_in(connect, user, profile, llm_server):
    reset_provider(OpenAICompatible(base_url=llm_server.base_url, api_key="", model="text-only", supports_images=False))
    try:
        assert await _upload_as(user, png(), new_mid(6), "") == 201
        chat = await connect(user)
        await chat.ws.send_json_to({"action": "reply", "mid": new_mid(6)})
        await chat.frames_until_reply()
    finally:
        reset_provider(None)
    last = llm_server.requests[-1]["messages"][-1]
    assert last == {"role": "user", "content": "[image: photo.png]"}
    assert "image_url" not in str(llm_server.requests[-1])


@pytest.mark.django_db(transaction=True)
async def test_an_earlier_image_is_replayed_as_its_stand_in_not_resent(connect, user, profile, llm_server, llm_provider):
    assert await _upload_as(user, png(), new_mid(7), "look") == 201
    chat = await connect(user)
    await chat.ws.send_json_to({"action": "reply", "mid": new_mid(7)})
    await chat.frames_until_reply()
    await chat.say("and now?", mid=new_mid(8))
    turns = llm_server.requests[-1]["messages"][1:]
    assert turns[0] == {"role": "user", "content": "[image: look]"}
    assert turns[-1] == {"role": "user", "content": "and now?"}
