"""Issue 16 point 3 (SPEC S4, A7): files are what they claim. Uploads are decoded and written
again (a GIF/JS polyglot or trailing bytes do not survive), the pixel limit is read from the
header before decoding, and /images/<pk>/ serves the type read from the stored file, with
Content-Disposition and nosniff, from a path the importer cannot choose."""

import io

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from memory.archive import archive_message
from memory.images import ImageRefused, check_image
from memory.models import Message
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}


def gif() -> bytes:
    out = io.BytesIO()
    Image.new("P", (8, 8), 3).save(out, "GIF")
    return out.getvalue()


POLYGLOT_TAIL = b"\n*/=1;alert(document.domain)//<script>alert(1)</script>"


def test_trailing_bytes_and_a_script_tail_do_not_survive_the_reencoding():
    checked = check_image(gif() + POLYGLOT_TAIL, name="cat.gif")
    assert checked.content_type == "image/gif"
    assert b"alert" not in checked.data and b"<script" not in checked.data
    with Image.open(io.BytesIO(checked.data)) as image:
        assert image.size == (8, 8)


def test_the_pixel_limit_is_read_from_the_header_before_decoding():
    out = io.BytesIO()
    Image.new("1", (7000, 7000)).save(out, "PNG")  # a few kB on disk, 49 MP when decoded
    with pytest.raises(ImageRefused) as refused:
        check_image(out.getvalue())
    assert refused.value.status == 413 and "PREVIOUSLY_IMAGE_MAX_PIXELS" in refused.value.reason


def test_an_uploaded_polyglot_is_served_as_the_image_it_became(client, profile):
    client.force_login(profile.user)
    upload = SimpleUploadedFile("x.gif", gif() + POLYGLOT_TAIL, "image/gif")
    response = client.post(reverse("chat_image_upload"), {"mid": new_mid(1), "image": upload, "tz": "Asia/Shanghai"},
                           headers={"HX-Request": "true"})
    assert response.status_code == 201, response.content
    message = Message.objects.get(mid=new_mid(1))
    response = client.get(reverse("chat_image", args=[message.pk]))
    body = b"".join(response.streaming_content)
    assert response["Content-Type"] == "image/gif" and b"alert" not in body
    assert response["X-Content-Type-Options"] == "nosniff" and response["Content-Disposition"].startswith("inline;")


def test_imported_metadata_chooses_neither_the_served_type_nor_the_file(client, profile):
    client.force_login(profile.user)
    mid = new_mid(2)
    # A file of the profile's own (e.g. from an earlier upload) with script in it, and an
    # imported record pointing at it with a script type.
    planted = default_storage.save(f"images/{profile.pk}/planted.gif", ContentFile(gif() + POLYGLOT_TAIL))
    foreign = archive_message(profile=profile, mid=mid, speaker="user", content="", message_type="image",
                              attachment={"path": planted, "content_type": "text/html"}).message
    assert client.get(reverse("chat_image", args=[foreign.pk])).status_code == 404  # not its own path
    own = default_storage.save(f"images/{profile.pk}/{new_mid(3)}.gif", ContentFile(b"<html><script>alert(1)</script>"))
    scripted = archive_message(profile=profile, mid=new_mid(3), speaker="user", content="", message_type="image",
                               attachment={"path": own, "content_type": "text/javascript"}).message
    assert client.get(reverse("chat_image", args=[scripted.pk])).status_code == 404  # not an image by content
    real = default_storage.save(f"images/{profile.pk}/{new_mid(4)}.gif", ContentFile(gif()))
    typed = archive_message(profile=profile, mid=new_mid(4), speaker="user", content="", message_type="image",
                            attachment={"path": real, "content_type": "text/html"}).message
    response = client.get(reverse("chat_image", args=[typed.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "image/gif"


@pytest.mark.parametrize("mid", ["c_0123456789abcdef\n", "c_0123456789ABCDEF", "c_/0123456789abcd"])
def test_a_mid_that_does_not_fully_match_is_refused_before_the_file_is_stored(client, profile, mid, tmp_path):
    client.force_login(profile.user)
    upload = SimpleUploadedFile("x.gif", gif(), "image/gif")
    response = client.post(reverse("chat_image_upload"), {"mid": mid, "image": upload})
    assert response.status_code == 400 and "invalid message id" in response.content.decode()
    assert not Message.objects.exists() and not (tmp_path / "images").exists()
