"""The card pages (SPEC H2-H4; issue 27 points 5, 7, 8): import a card with a preview, see its
avatar and lorebook, catch up, and take conversations and the companion away."""

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections
from django.test import AsyncClient, Client

from memory.interop.character_card import read_card
from memory.models import CatchUp, EvolutionRun, LoreEntry, Message, Profile
from previously.server import body_limit
from tests.csp import assert_csp_clean
from tests.llm_server import Turn
from tests.memory.interop.card_fixtures import picture, v2_png
from tests.previously.agent.helpers import make_slice

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media_in_tmp")]


@pytest.fixture
def client(user):
    c = Client()
    c.force_login(user)
    return c


def upload(client, data: bytes, name="Seraphina.png", **extra):
    return client.post("/profiles/card/", {"card": SimpleUploadedFile(name, data), **extra})


def test_a_card_is_previewed_then_made_into_a_companion(client, user):
    listing = client.get("/profiles/").content.decode()
    assert "<title>Companions · Previously</title>" in listing and listing.count('id="card-import-h"') == 1
    preview = upload(client, v2_png())

    page = preview.content.decode()
    assert preview.status_code == 200 and "Seraphina.png holds the card “Seraphina” (chara_card_v2)" in page
    assert "a new companion, key <code>seraphina</code>" in page and "3 entries, 2 enabled" in page
    assert not Profile.objects.filter(user=user, key="seraphina").exists()  # nothing written by the preview
    assert_csp_clean(preview)

    token = preview.context["token"]
    applied = client.post("/profiles/card/apply/", {"token": token, "apply": "1"})

    assert applied.status_code == 302 and applied["Location"] == "/profiles/seraphina/edit/"
    assert Profile.objects.get(user=user, key="seraphina").name == "Seraphina"


def test_the_settings_page_shows_the_avatar_lorebook_catch_up_and_exports(client, user):
    client.post("/profiles/card/apply/", {"token": upload(client, v2_png()).context["token"], "apply": "1"})

    response = client.get("/profiles/seraphina/edit/")

    page = response.content.decode()
    assert '<img class="avatar large" src="/profiles/seraphina/avatar/"' in page
    assert "<code>Eldoria</code> <code>forest</code>" in page and "Eldoria is an ancient forest" in page
    assert "disabled" in page and "when a key is said" in page
    assert "Made from Seraphina.png (chara_card_v2)" in page
    assert "No model is configured, so the card cannot catch up." in page
    for fmt in ("md", "jsonl", "card.png", "card.json"):
        assert f'href="/profiles/seraphina/export/{fmt}/"' in page
    assert_csp_clean(response)


def test_a_cancelled_preview_writes_nothing(client, user):
    token = upload(client, v2_png()).context["token"]

    client.post("/profiles/card/apply/", {"token": token, "cancel": "1"})

    assert not Profile.objects.filter(user=user, key="seraphina").exists()


def test_a_png_without_a_card_is_refused_on_the_page_naming_the_file(client, user):
    response = upload(client, picture(), name="cat.png")

    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "cat.png: this PNG holds no character card" in page and "Nothing was written." in page
    assert not Profile.objects.filter(user=user).exclude(key="owner").exists()


def test_an_update_from_the_settings_page_goes_to_that_companion(client, user, profile):
    token = upload(client, v2_png(), profile="owner").context["token"]
    client.post("/profiles/card/apply/", {"token": token, "apply": "1"})

    profile.refresh_from_db()
    assert profile.name == "Seraphina" and LoreEntry.objects.for_profile(profile).count() == 3


def test_another_persons_avatar_and_exports_are_404(client, django_user_model):
    other = django_user_model.objects.create_user(username="bob", password="pw-bob-1234")
    Profile.objects.create(user=other, key="bobs", name="Bob's")

    assert client.get("/profiles/bobs/avatar/").status_code == 404
    assert client.get("/profiles/bobs/export/md/").status_code == 404
    assert client.post("/profiles/bobs/catch-up/", {"action": "start"}).status_code == 404


def test_exports_download_and_read_back(client, user):
    client.post("/profiles/card/apply/", {"token": upload(client, v2_png()).context["token"], "apply": "1"})
    companion = Profile.objects.get(user=user, key="seraphina")

    md = client.get("/profiles/seraphina/export/md/")
    jsonl = client.get("/profiles/seraphina/export/jsonl/")
    png = client.get("/profiles/seraphina/export/card.png/")
    as_json = client.get("/profiles/seraphina/export/card.json/")

    assert md["Content-Disposition"] == 'attachment; filename="Seraphina.md"'
    text = b"".join(md.streaming_content).decode()
    assert "**Seraphina**" in text and "You're awake, alice." in text
    rows = [json.loads(r) for r in b"".join(jsonl.streaming_content).decode().split("\n")]
    assert rows[0]["character_name"] == "Seraphina" and rows[1]["swipe_id"] == 0 and len(rows[1]["swipes"]) == 3
    card = read_card(png.content, name="Seraphina.png")
    assert card.data["name"] == "Seraphina" and card.image is not None
    assert read_card(as_json.content, name="s.json").data == card.data
    assert Message.objects.filter(profile=companion).count() == 3


def test_the_slice_page_links_its_own_exports(client, profile):
    slice_ = make_slice(profile, lines=[("user", "hello")])

    page = client.get(f"/slices/{slice_.key}/?profile=owner").content.decode()
    md = client.get(f"/profiles/owner/export/md/?slice={slice_.key}")

    assert f'href="/profiles/owner/export/md/?slice={slice_.key}"' in page
    assert f'href="/profiles/owner/export/jsonl/?slice={slice_.key}"' in page
    assert md["Content-Disposition"] == f'attachment; filename="Your-companion-{slice_.key}.md"'
    assert "hello" in b"".join(md.streaming_content).decode()


def test_the_catch_up_button_runs_the_agent_and_the_page_reports_it(client, profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "I moved to Lisbon")])
    page = client.get("/profiles/owner/edit/").content.decode()
    assert "1 conversation to read: about 4 model calls (at most 25)" in page
    llm_server.script(
        Turn(content='{"worth": true, "reason": "a move"}'),
        Turn(tool_calls=[("add_now", {"text": "Lives in Lisbon", "refs": [slice_.ref], "since": "2026-08-17"})]),
        Turn(tool_calls=[("finish", {"summary": "Noted the move."})]),
    )

    response = client.post("/profiles/owner/catch-up/", {"action": "start"}, follow=True)

    assert "The card is catching up: 1 conversations, oldest first." in response.content.decode()
    assert "Finished: 1 conversations read, 0 failed." in response.content.decode()
    assert "The card has read every past conversation." in response.content.decode()
    assert CatchUp.objects.get(profile=profile).status == CatchUp.Status.FINISHED


def test_without_a_model_the_catch_up_button_starts_nothing(client, profile):
    make_slice(profile, lines=[("user", "hello")])

    response = client.post("/profiles/owner/catch-up/", {"action": "start"}, follow=True)

    assert "No model is configured, so the card cannot catch up; nothing was started." in response.content.decode()
    assert not CatchUp.objects.exists()


def test_the_card_upload_route_takes_a_card_sized_body(settings):
    assert body_limit(b"/profiles/card/") >= settings.PREVIOUSLY_IMAGE_MAX_BYTES



@pytest.mark.django_db(transaction=True)
async def test_under_asgi_an_export_streams_in_batches_from_the_database_thread(user):
    profile = await sync_to_async(Profile.objects.create)(user=user, key="big", name="Big", language="en")
    await sync_to_async(make_slice)(profile, lines=[("user", f"line {i}") for i in range(450)])
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)

    response = await client.get("/profiles/big/export/jsonl/")

    assert response.is_async
    chunks = [chunk async for chunk in response.streaming_content]
    assert len(chunks) >= 3  # 452 lines in batches of 200
    rows = [json.loads(row) for row in b"".join(chunks).decode().split("\n")]
    assert [r["mes"] for r in rows[1:]] == [f"line {i}" for i in range(450)]
    await sync_to_async(connections.close_all)()  # the sync thread's connection (PostgreSQL drops the test database)


def test_while_it_runs_the_catch_up_section_polls_its_progress(client, profile, llm_provider):
    slices = [make_slice(profile, key, lines=[("user", "hello")]) for key in ("2026-08-16-0515", "2026-08-17-0515")]
    CatchUp.objects.create(profile=profile, planned=2, done=1, current=slices[1])
    EvolutionRun.objects.create(profile=profile, slice=slices[1], trigger="catch_up", status="running")

    page = client.get("/profiles/owner/edit/")
    section = client.get("/profiles/owner/catch-up/")

    assert 'hx-get="/profiles/owner/catch-up/" hx-trigger="every 5s" hx-swap="outerHTML"' in page.content.decode()
    assert_csp_clean(page)
    html = section.content.decode()
    assert html.startswith('<section class="catch-up" id="catch-up"') and "Catching up: 1 of 2 conversations read." in html
    assert "Stop catching up" in html
    client.post("/profiles/owner/catch-up/", {"action": "stop"})
    assert "Stopping after the conversation in progress" in client.get("/profiles/owner/catch-up/").content.decode()
    client.post("/profiles/owner/catch-up/", {"action": "stop"})
    html = client.get("/profiles/owner/catch-up/").content.decode()
    assert "Stopped after 1 of 2 conversations; start again to go on." in html and "hx-trigger" not in html
