"""The data page's history import (SPEC H1, issue 27 point 6): upload, preview, apply with
progress, result; and a character card through the same upload (H2, issue 27 point 5)."""

import base64
import copy
import json
import shutil
import sys

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from memory.interop.character_card import import_character_card
from memory.interop.previews import preview_exists
from memory.models import CatchUp, CompanionCard, LoreEntry, Message, Profile
from previously.agent import catch_up
from previously.pages.data import history, progress
from tests.memory.history import samples as s
from tests.memory.interop.card_fixtures import (
    CHINESE_CARD,
    V2_CARD,
    picture,
    v2_png,
    v3_png,
    with_text_chunks,
)

# Each test's uploads in its own folder: a parallel worker's user 1 would drop this one's pending
# upload (one per person and kind, by user id).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media_in_tmp")]


@pytest.fixture
def client_in(client, user):
    client.force_login(user)
    return client


def upload(client_in, tmp_path, **extra):
    path = s.chatgpt_zip(tmp_path / "chatgpt-export.zip", [s.chatgpt_conversation()])
    data = {"history": SimpleUploadedFile("chatgpt-export.zip", path.read_bytes()), "profile": "mia", **extra}
    return client_in.post(reverse("data_history_preview"), data)


def test_preview_then_apply_then_progress_shows_the_result(client_in, tmp_path, user):
    page = upload(client_in, tmp_path)
    assert page.status_code == 200
    html = page.content.decode()
    assert "chatgpt-export.zip: a ChatGPT export with 1 conversation." in html
    assert "It makes a new companion <code>mia</code>." in html
    assert "Trip to Hangzhou" in html and Message.objects.count() == 0
    token = client_in.session["history_import_pending"]["token"]
    done = client_in.post(reverse("data_history_apply"), {"token": token}, follow=True)
    assert done.status_code == 200
    assert "6 messages from 1 conversations, in 2 new slices." in done.content.decode()
    mia = Profile.objects.get(user=user, key="mia")
    assert Message.objects.filter(profile=mia).count() == 6
    poll = client_in.get(reverse("data_history_progress", args=[token]), HTTP_HX_REQUEST="true")
    assert 'id="history-done"' in poll.content.decode() and "<html" not in poll.content.decode()


def upload_loop(client_in, tmp_path):
    """A ChatGPT export whose parents form a loop, uploaded for its preview."""
    conv = s.chatgpt_conversation()
    conv["mapping"]["root"]["parent"] = "a3"
    path = s.chatgpt_zip(tmp_path / "loop.zip", [conv])
    return client_in.post(reverse("data_history_preview"),
                          {"history": SimpleUploadedFile("loop.zip", path.read_bytes()), "profile": "owner"})


def test_refused_file_names_the_problem_and_keeps_nothing(client_in, tmp_path):
    page = upload_loop(client_in, tmp_path)
    assert page.status_code == 400
    assert "loop.zip:conversations.json[0] (c-1): the parents form a loop" in page.content.decode()
    assert "history_import_pending" not in client_in.session


def test_someone_elses_progress_is_not_found(client_in, tmp_path):
    assert client_in.get(reverse("data_history_progress", args=["0" * 32])).status_code == 404


def test_cancel_drops_the_upload(client_in, tmp_path):
    upload(client_in, tmp_path)
    token = client_in.session["history_import_pending"]["token"]
    client_in.post(reverse("data_history_apply"), {"token": token, "cancel": "1"})
    assert not preview_exists(token) and Message.objects.count() == 0


def test_progress_mid_apply_keeps_one_scale_per_stage(client_in, tmp_path, settings, monkeypatch):
    """Issue 27 audit point 6: the bar counted conversations of their total, then lines of the
    expected lines, so it jumped back. Now the check counts conversations read (no total: the
    bar has no value) and the write counts lines of the lines found new, from 0."""
    settings.PREVIOUSLY_HISTORY_BATCH_ROWS = 2
    monkeypatch.setattr(progress, "EVERY", 0)
    written = []
    real_write = progress.write

    def recording(token, state):
        written.append(dict(state))
        real_write(token, state)

    monkeypatch.setattr(progress, "write", recording)
    convs = [s.chatgpt_conversation(cid=f"c-{i}", t0=s.T0 + i * 86400) for i in range(3)]
    path = s.chatgpt_zip(tmp_path / "three.zip", convs)
    client_in.post(reverse("data_history_preview"),
                   {"history": SimpleUploadedFile("three.zip", path.read_bytes()), "profile": "mia"})
    token = client_in.session["history_import_pending"]["token"]
    client_in.post(reverse("data_history_apply"), {"token": token})

    running = [(st["stage"], st["done"], st["total"]) for st in written if st["state"] == "running"]
    assert running == [("checking", 1, 0), ("checking", 2, 0), ("checking", 3, 0),
                       *[("writing", n, 18) for n in range(0, 19, 2)]]
    assert written[-1]["state"] == "done"

    def page_at(state) -> str:
        real_write(token, state)
        return client_in.get(reverse("data_history_progress", args=[token]), HTTP_HX_REQUEST="true").content.decode()

    checking = page_at({"state": "running", "stage": "checking", "done": 2, "total": 0})
    assert "Checking the file: 2 conversations read." in checking
    assert '<progress id="history-bar"></progress>' in checking and 'hx-trigger="load delay:1s"' in checking
    writing = page_at({"state": "running", "stage": "writing", "done": 8, "total": 18})
    assert "Writing the lines: 8 of 18 lines." in writing
    assert '<progress id="history-bar" max="18" value="8"></progress>' in writing


def test_the_done_state_offers_to_catch_the_card_up_with_its_estimate(client_in, tmp_path, user, llm_provider):
    upload(client_in, tmp_path)
    token = client_in.session["history_import_pending"]["token"]
    done = client_in.post(reverse("data_history_apply"), {"token": token}, follow=True).content.decode()

    mia = Profile.objects.get(user=user, key="mia")
    found = catch_up.plan(mia)
    assert found.runs == 2
    assert "Catch up on the history" in done
    assert (f"{found.runs} conversations to read: about {found.calls_expected} model calls (at most "
            f"{found.calls_at_most}) and {found.tokens_expected} tokens sent.") in done
    assert f'action="{reverse("profile_catch_up", args=["mia"])}"' in done
    assert '<input type="hidden" name="action" value="start">' in done and "Start catching up" in done
    assert not CatchUp.objects.exists()  # offered, not started


def test_the_done_state_says_when_no_model_can_catch_the_card_up(client_in, tmp_path):
    upload(client_in, tmp_path)
    token = client_in.session["history_import_pending"]["token"]
    done = client_in.post(reverse("data_history_apply"), {"token": token}, follow=True).content.decode()
    assert "No model is configured, so the card cannot catch up." in done and "Start catching up" not in done


# --- where the apply runs (S4, BENCH §5): beside a live server, in a child process ---


@pytest.fixture
def tasks_on_server_threads(settings):
    settings.TASKS = {"default": {"BACKEND": "previously.task_backend.ThreadPoolBackend"}}


def previewed(client_in, tmp_path) -> str:
    """An upload previewed, and marked as the session's running import (as applying it does) so
    its progress page answers; the test then runs the task itself, to its end."""
    upload(client_in, tmp_path)
    session = client_in.session
    token = session[history.RUNNING] = session.pop(history.PENDING)["token"]
    session.save()
    return token


@pytest.mark.django_db(transaction=True)
def test_beside_the_server_the_import_runs_in_a_child_process_s4(client_in, tmp_path, user, tasks_on_server_threads,
                                                                 monkeypatch):
    """With the embedded thread backend the server's own process never runs the import: its
    in-process apply is made to fail here, and the import is written all the same (by the child,
    which reaches the same database and media folder)."""
    token = previewed(client_in, tmp_path)

    def not_here(*args, **kwargs):
        raise AssertionError("the import ran in the server's process")

    monkeypatch.setattr(history, "run_apply", not_here)
    state = history.apply_history.call(token, user.pk, "mia", "chatgpt", "chatgpt-export.zip")
    assert state == "done", progress.read(token)
    assert Message.objects.filter(profile__user=user, profile__key="mia").count() == 6
    assert not preview_exists(token)
    poll = client_in.get(reverse("data_history_progress", args=[token]))
    assert "6 messages from 1 conversations, in 2 new slices." in poll.content.decode()


@pytest.mark.django_db(transaction=True)
def test_beside_the_server_the_preview_is_read_in_a_child_process_s4(client_in, tmp_path, tasks_on_server_threads,
                                                                     monkeypatch):
    """The preview reads the whole file: beside the server that is a child's work too (this
    process's reader made to fail), and the page shows what the child found, or its refusal
    naming the file and the record."""
    def not_here(*args, **kwargs):
        raise AssertionError("the preview ran in the server's process")

    monkeypatch.setattr(history, "preview_report", not_here)
    html = upload(client_in, tmp_path).content.decode()
    assert "chatgpt-export.zip: a ChatGPT export with 1 conversation." in html and "Trip to Hangzhou" in html
    assert Message.objects.count() == 0
    page = upload_loop(client_in, tmp_path)
    assert page.status_code == 400
    assert "loop.zip:conversations.json[0] (c-1): the parents form a loop" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_child_that_dies_is_reported_as_stopped_with_its_code(client_in, tmp_path, user, tasks_on_server_threads,
                                                                monkeypatch):
    """A child that ends without saying how (killed, out of memory, a broken start: here a
    program that fails at once) leaves the page "stopped" with its exit code, not "running"."""
    token = previewed(client_in, tmp_path)
    monkeypatch.setattr(sys, "executable", shutil.which("false"))
    assert history.apply_history.call(token, user.pk, "mia", "chatgpt", "chatgpt-export.zip") == "stopped"
    poll = client_in.get(reverse("data_history_progress", args=[token])).content.decode()
    assert "its process ended with code 1" in poll
    assert Message.objects.count() == 0 and not preview_exists(token)


# --- a character card through the same upload (H2, issue 27 point 5) ---------------------------------


def upload_card(client, data: bytes, name="Seraphina.png", **extra):
    return client.post(reverse("data_history_preview"), {"history": SimpleUploadedFile(name, data), **extra})


def apply_pending(client):
    return client.post(reverse("data_history_apply"), {"token": client.session["history_import_pending"]["token"]})


def stored_uploads() -> list[str]:
    return default_storage.listdir("imports")[1] if default_storage.exists("imports") else []


def test_a_v2_png_card_is_previewed_then_makes_a_companion_linked_to_its_settings(client_in, user):
    """Issue 27 point 5 and 6, H2: the upload recognises the card by content; its preview says
    which companion it makes and what it brings (name, persona, picture, lorebook, greetings),
    writing nothing; the apply makes it (through import_character_card, the command's entry
    point) and links to the companion's settings page."""
    page = upload_card(client_in, v2_png())

    html = page.content.decode()
    assert page.status_code == 200
    assert "Seraphina.png holds the card “Seraphina” (chara_card_v2)." in html
    assert "It makes a new companion <code>seraphina</code>." in html
    for tag in ("name", "persona", "picture", "lorebook", "greetings"):
        assert f'<span class="tag">{tag}</span>' in html
    assert "3 entries, 2 enabled" in html and "the card’s picture becomes the avatar" in html
    assert "3 (the first opens the first conversation, the others are its alternatives)" in html
    assert not Profile.objects.filter(user=user, key="seraphina").exists() and Message.objects.count() == 0

    done = apply_pending(client_in)

    html = done.content.decode()
    assert done.status_code == 200 and "Companion “Seraphina” made from the card." in html
    assert f'href="{reverse("profile_edit", args=["seraphina"])}" id="history-card-settings"' in html
    seraphina = Profile.objects.get(user=user, key="seraphina")
    assert seraphina.name == "Seraphina" and seraphina.persona.startswith("Seraphina is a guardian")
    assert seraphina.avatar["content_type"] == "image/png"
    assert LoreEntry.objects.for_profile(seraphina).count() == 3
    assert Message.objects.filter(profile=seraphina).count() == 3  # the greeting and its two alternatives
    assert "history_import_pending" not in client_in.session and stored_uploads() == []


def test_a_v3_png_card_without_a_v2_chunk_makes_its_companion(client_in, user):
    """Issue 27 point 5, H2: a V3 card (`ccv3` alone) from the data page."""
    html = upload_card(client_in, v3_png(with_v2=False), name="seraphina-v3.png").content.decode()
    assert "seraphina-v3.png holds the card “Seraphina” (chara_card_v3)." in html

    apply_pending(client_in)

    assert CompanionCard.objects.get(profile__user=user, profile__key="seraphina").spec == "chara_card_v3"


def test_a_json_card_makes_its_companion_without_a_picture(client_in, user):
    """Issue 27 point 5, H2: the card as a .json file, recognised by its keys, in Chinese."""
    data = json.dumps(CHINESE_CARD, ensure_ascii=False).encode()
    html = upload_card(client_in, data, name="linwan.json").content.decode()
    assert "linwan.json holds the card “林晚” (chara_card_v3)." in html and "none in the card" in html
    assert "1 entry, 1 enabled" in html

    done = apply_pending(client_in).content.decode()

    linwan = Profile.objects.get(user=user, name="林晚")
    assert linwan.key.startswith("card-") and linwan.avatar is None and linwan.language == "zh"
    assert "Companion “林晚” made from the card." in done
    assert reverse("profile_edit", args=[linwan.key]) in done


def test_the_same_card_uploaded_again_updates_its_companion_rather_than_adding_one(client_in, user):
    """Issue 27 point 5, H2: without a key, a card made before is found again by its identity;
    the preview names that companion and only what the new version changes."""
    upload_card(client_in, v2_png())
    apply_pending(client_in)
    companions = Profile.objects.filter(user=user).count()
    newer = copy.deepcopy(V2_CARD)
    newer["data"]["description"] = "{{char}} now keeps the lighthouse at the forest's edge."

    html = upload_card(client_in, v2_png(newer), name="Seraphina-1.3.png").content.decode()

    assert "It updates your companion <code>seraphina</code> (Seraphina)." in html
    assert '<span class="tag">persona</span>' in html and '<span class="tag">name</span>' not in html
    assert "the companion already has conversations; its first one stays as it is." in html
    done = apply_pending(client_in).content.decode()
    assert "Companion “Seraphina” updated from the card." in done
    assert Profile.objects.filter(user=user).count() == companions
    seraphina = Profile.objects.get(user=user, key="seraphina")
    assert seraphina.persona.startswith("Seraphina now keeps the lighthouse")
    assert Message.objects.filter(profile=seraphina).count() == 3  # no second set of greetings


@pytest.mark.parametrize(("name", "data", "said"), [
    ("cat.png", picture(), "cat.png: this PNG holds no character card (no “chara” or “ccv3” text chunk)."),
    ("broken.png", with_text_chunks(picture(), [("chara", "this is not base64!")]),
     "broken.png: its “chara” text chunk is not base64."),
    ("yaml.png", with_text_chunks(picture(), [("chara", base64.b64encode(b"name: Seraphina").decode())]),
     "yaml.png: its “chara” text chunk is not JSON"),
    ("cut.json", json.dumps(V2_CARD).encode()[:300], "cut.json: the file is not JSON"),
    ("huge.png", v2_png(), "huge.png: the file is "),
])
def test_a_hostile_card_is_refused_naming_the_file_and_nothing_is_written(client_in, user, settings, name, data,
                                                                          said):
    """Issue 27 point 9, H2, S4: a PNG without a card, a card chunk that is not base64 JSON, a
    card cut short, and one over PREVIOUSLY_IMAGE_MAX_BYTES: the command's own refusal, naming
    the file and the problem; no companion, no upload left behind."""
    if name == "huge.png":
        settings.PREVIOUSLY_IMAGE_MAX_BYTES = len(data) - 1
    page = upload_card(client_in, data, name=name)

    html = page.content.decode()
    assert page.status_code == 400 and 'role="alert"' in html
    assert said in html and "Nothing was written." in html
    if name == "huge.png":
        assert f"a character card may be at most {len(data) - 1:,} (PREVIOUSLY_IMAGE_MAX_BYTES)" in html
    assert not Profile.objects.filter(user=user).exclude(key="owner").exists()
    assert not LoreEntry.objects.exists() and not CompanionCard.objects.exists() and Message.objects.count() == 0
    assert "history_import_pending" not in client_in.session and stored_uploads() == []


def test_a_card_only_ever_touches_the_uploaders_own_companions(client_in, user, django_user_model):
    """P2, H2: Bob's companion made from the same card, and Bob's key given on Alice's upload,
    leave Bob's companions alone: Alice's card makes her own; Bob's pending card is not hers to
    apply."""
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-12345")
    import_character_card(v2_png(), user=bob, name="Seraphina.png")
    bobs_mia = Profile.objects.create(user=bob, key="mia", name="Bob's Mia", persona="Bob's own words.")
    bob_client = Client()
    bob_client.force_login(bob)
    upload_card(bob_client, v2_png(), profile="mia")
    bobs_token = bob_client.session["history_import_pending"]["token"]

    assert "It makes a new companion <code>seraphina</code>." in upload_card(client_in, v2_png()).content.decode()
    html = upload_card(client_in, v2_png(), profile="mia").content.decode()
    assert "It makes a new companion <code>mia</code>." in html
    stolen = client_in.post(reverse("data_history_apply"), {"token": bobs_token})
    assert stolen.status_code == 302 and stolen["Location"] == reverse("data_history")
    assert preview_exists(bobs_token)
    apply_pending(client_in)

    bobs_mia.refresh_from_db()
    assert (bobs_mia.name, bobs_mia.persona, bobs_mia.avatar) == ("Bob's Mia", "Bob's own words.", None)
    assert not LoreEntry.objects.filter(profile=bobs_mia).exists()
    assert "She found bob wounded" in Profile.objects.get(user=bob, key="seraphina").persona
    assert Profile.objects.filter(user=bob).count() == 2
    assert Profile.objects.get(user=user, key="mia").name == "Seraphina"
    assert not Profile.objects.filter(user=user, key="seraphina").exists()
