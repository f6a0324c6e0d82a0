"""Issue 24 point 5 (SPEC S6): every text a person stores has a stated limit (memory/limits.py);
over it the page refuses (never a 500), naming the limit and its setting, and nothing is
stored: the chat line sent without JavaScript (an image's caption), a persona and the other
companion settings, experience text and the reason kept in its history, a favourite's excerpt,
a hand edit of the card."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from memory.card.store import live_card
from memory.models import (
    Card,
    EvolutionRun,
    Experience,
    ExperienceHistory,
    Favourite,
    Message,
    Profile,
)
from tests.factories import MessageFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def small_limits(settings, tmp_path):
    settings.PREVIOUSLY_MAX_MESSAGE_CHARS = 2048
    settings.PREVIOUSLY_MAX_PERSONA_CHARS = 512
    settings.PREVIOUSLY_MAX_FIELD_CHARS = 300
    settings.MEDIA_ROOT = str(tmp_path)


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), (1, 2, 3)).save(out, "PNG")
    return out.getvalue()


def test_an_image_caption_over_the_message_limit_is_refused_and_nothing_stored(logged_in, profile):
    response = logged_in.post(reverse("chat_image_upload"), {
        "image": SimpleUploadedFile("a.png", png(), "image/png"), "mid": "c_00000000000000c1", "text": "字" * 2049,
    })
    body = response.content.decode()
    assert response.status_code == 413
    assert "2049" in body and "2048" in body and "PREVIOUSLY_MAX_MESSAGE_CHARS" in body and "shorten" in body
    assert not Message.objects.exists()


def test_a_persona_over_its_limit_is_refused_on_the_settings_page(logged_in, profile):
    url = reverse("profile_edit", args=[profile.key])
    response = logged_in.post(url, {"name": "Mei", "persona": "p" * 513, "language": "en", "tz": ""})
    html = response.content.decode()
    assert response.status_code == 400 and "PREVIOUSLY_MAX_PERSONA_CHARS" in html and "513" in html
    assert Profile.objects.get(pk=profile.pk).persona == profile.persona
    response = logged_in.post(reverse("profiles"), {"key": "two", "name": "", "persona": "p" * 513, "language": "en"})
    assert response.status_code == 400 and "PREVIOUSLY_MAX_PERSONA_CHARS" in response.content.decode()
    assert not Profile.objects.filter(key="two").exists()


def test_experience_text_and_its_reason_are_bounded(logged_in, profile, user):
    line = MessageFactory(profile=profile, mid="c_00000000000000d1", content="we went to the sea")
    url = reverse("curation:experiences", args=[profile.key])
    response = logged_in.post(url, {"title": "Sea", "content": "c" * 301, "source_mids": line.mid,
                                    "time_certainty": "unknown"})
    assert "PREVIOUSLY_MAX_FIELD_CHARS" in response.content.decode() and not Experience.objects.exists()
    logged_in.post(url, {"title": "Sea", "content": "the sea", "source_mids": line.mid, "time_certainty": "unknown"})
    experience = Experience.objects.get()
    before = ExperienceHistory.objects.count()
    response = logged_in.post(reverse("curation:experience_action", args=[profile.key, experience.eid, "confirm"]),
                              {"reason": "r" * 301}, follow=True)
    assert "PREVIOUSLY_MAX_FIELD_CHARS" in response.content.decode()
    assert ExperienceHistory.objects.count() == before
    assert Experience.objects.get().status == Experience.Status.CANDIDATE


def test_a_favourite_excerpt_over_the_field_limit_is_refused(logged_in, profile):
    line = MessageFactory(profile=profile, mid="c_00000000000000e1", content="w" * 1000)
    response = logged_in.post(reverse("chat_favourite", args=[line.mid]), {"excerpt": "w" * 301},
                              headers={"HX-Request": "true"})
    assert response.status_code == 422 and "PREVIOUSLY_MAX_FIELD_CHARS" in response.content.decode()
    assert not Favourite.objects.exists()


def test_a_hand_edit_over_the_field_limit_is_refused_naming_the_setting(logged_in, profile):
    version = live_card(profile).version
    response = logged_in.post(reverse("card_edit"), {"action": "add", "section": "facts", "text": "f" * 301,
                                                     "version": version}, follow=True)
    assert "PREVIOUSLY_MAX_FIELD_CHARS" in response.content.decode()
    assert Card.objects.get(profile=profile).version == version and not EvolutionRun.objects.exists()
