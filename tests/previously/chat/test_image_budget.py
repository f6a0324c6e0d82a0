"""Issue 24 point 2 (SPEC S4, S6): animated-image bombs. Pixels × frames are bounded before
decoding: a still image over PREVIOUSLY_IMAGE_MAX_PIXELS is refused (413, naming the limit and
its setting); an animation keeps the frames that fit the budget (and PREVIOUSLY_IMAGE_MAX_FRAMES),
the first always, and the person is told what was left out."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from memory.images import ImageRefused, check_image, frames_within
from memory.models import Message
from tests.gif_bomb import bomb_gif
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def frames_of(data: bytes) -> int:
    with Image.open(io.BytesIO(data)) as image:
        return getattr(image, "n_frames", 1)


def test_a_2kb_gif_of_50_full_canvas_frames_keeps_only_the_frames_within_the_budget(settings):
    settings.PREVIOUSLY_IMAGE_MAX_PIXELS = 16_000_000
    data = bomb_gif((2500, 2500), 50)
    assert len(data) < 2048
    checked = check_image(data, name="bomb.gif")
    assert frames_of(checked.data) == frames_within(2500, 2500) == 1  # 6.25 MP a frame: the first only
    assert "PREVIOUSLY_IMAGE_MAX_PIXELS" in checked.note and "PREVIOUSLY_IMAGE_MAX_FRAMES" in checked.note
    assert checked.thumb.startswith(b"\xff\xd8")  # the thumbnail comes from the same decode


def test_a_small_animation_keeps_its_frames_up_to_the_frame_limit(settings):
    settings.PREVIOUSLY_IMAGE_MAX_PIXELS = 16_000_000
    settings.PREVIOUSLY_IMAGE_MAX_FRAMES = 200
    checked = check_image(bomb_gif((100, 100), 30))
    assert frames_of(checked.data) == 30 and checked.note == ""
    settings.PREVIOUSLY_IMAGE_MAX_FRAMES = 12
    checked = check_image(bomb_gif((100, 100), 30))
    assert frames_of(checked.data) == 12 and "12" in checked.note


def test_frames_with_their_own_palettes_count_the_same(settings):
    settings.PREVIOUSLY_IMAGE_MAX_PIXELS = 4_000_000
    checked = check_image(bomb_gif((500, 500), 40, local=True))
    assert frames_of(checked.data) == 4  # a quarter of 4 MP over 0.25 MP a frame


def test_a_still_image_over_the_pixel_budget_is_refused_naming_the_setting(settings):
    settings.PREVIOUSLY_IMAGE_MAX_PIXELS = 1_000_000
    out = io.BytesIO()
    Image.new("1", (1001, 1000)).save(out, "PNG")
    with pytest.raises(ImageRefused) as refused:
        check_image(out.getvalue())
    assert refused.value.status == 413
    assert "1001×1000" in refused.value.reason and "PREVIOUSLY_IMAGE_MAX_PIXELS" in refused.value.reason


def test_the_upload_says_which_frames_were_left_out(client, profile, settings):
    settings.PREVIOUSLY_IMAGE_MAX_PIXELS = 16_000_000
    client.force_login(profile.user)
    response = client.post(
        reverse("chat_image_upload"),
        {"image": SimpleUploadedFile("bomb.gif", bomb_gif((2500, 2500), 50), "image/gif"), "mid": new_mid(1)},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 201
    html = response.content.decode()
    assert 'id="notices" hx-swap-oob="beforeend"' in html and "PREVIOUSLY_IMAGE_MAX_PIXELS" in html
    assert Message.objects.filter(mid=new_mid(1), message_type="image").exists()
