"""The data page's history import (SPEC H1, issue 27 point 6): upload, preview, apply with
progress, result."""

import shutil
import sys

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from memory.interop.previews import preview_exists
from memory.models import CatchUp, Message, Profile
from previously.agent import catch_up
from previously.pages.data import history
from tests.memory.history import samples as s

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


def test_refused_file_names_the_problem_and_keeps_nothing(client_in, tmp_path):
    conv = s.chatgpt_conversation()
    conv["mapping"]["root"]["parent"] = "a3"
    path = s.chatgpt_zip(tmp_path / "loop.zip", [conv])
    page = client_in.post(reverse("data_history_preview"),
                          {"history": SimpleUploadedFile("loop.zip", path.read_bytes()), "profile": "owner"})
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
    monkeypatch.setattr(history, "PROGRESS_EVERY", 0)
    written = []
    real_write = history._write_progress

    def recording(token, state):
        written.append(dict(state))
        real_write(token, state)

    monkeypatch.setattr(history, "_write_progress", recording)
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

    monkeypatch.setattr(history, "apply", not_here)
    state = history.apply_history.call(token, user.pk, "mia", "chatgpt", "chatgpt-export.zip")
    assert state == "done", history._read_progress(token)
    assert Message.objects.filter(profile__user=user, profile__key="mia").count() == 6
    assert not preview_exists(token)
    poll = client_in.get(reverse("data_history_progress", args=[token]))
    assert "6 messages from 1 conversations, in 2 new slices." in poll.content.decode()


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
