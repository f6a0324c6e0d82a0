"""The export/import page (SPEC X1, X2, P2): own data only, staff for anyone, preview before apply."""

import io
import json
import os
import shutil
import sys
import time
import zipfile
from types import SimpleNamespace

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError, connection
from django.urls import reverse
from django.utils import translation
from PIL import Image

from memory.images import store_image_message
from memory.interop.full import write as write_module
from memory.interop.full.report import KINDS
from memory.interop.full.write import kind_shown
from memory.models import Message
from previously import child
from previously.pages.data import progress, views
from tests.factories import MessageFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def storage(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-1234")


def _upload(data: dict) -> SimpleUploadedFile:
    return SimpleUploadedFile("e.json", json.dumps(data, ensure_ascii=False).encode(), "application/json")


def _apply(client, token: str):
    """The apply as the page makes it (X2, issue 24 point 6): the POST sends the person to the
    progress page, read again until the import ends (a task: run at once by the test backend,
    on a thread beside the server)."""
    response = client.post(reverse("data_import_apply"), {"token": token}, follow=True)
    deadline = time.monotonic() + 60
    while response.context and response.context.get("progress", {}).get("state") in ("queued", "running"):
        assert time.monotonic() < deadline, response.context["progress"]
        time.sleep(0.1)
        response = client.get(reverse("data_import_progress", args=[token]))
    return response


def _created(applied, kind: str = "messages") -> int:
    """How many records of `kind` the ended apply's page reports as new."""
    return applied.context["progress"]["report"]["counts"][kind]["created"]


def _preview_as(client, user, profile):
    """`profile`'s owner exports their data; `user` uploads that export for the dry-run preview."""
    client.force_login(profile.user)
    export = json.loads(client.get(reverse("data_export")).content)
    client.force_login(user)
    return client.post(reverse("data_import_preview"), {"export": _upload(export)})


def test_data_page_requires_login(client):
    response = client.get(reverse("data"))
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_user_downloads_the_json_export_of_their_profile(client, profile):
    MessageFactory(profile=profile, content="我的话 🐱")
    client.force_login(profile.user)
    response = client.get(reverse("data_export"), {"profile": "owner"})
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    data = json.loads(response.content)
    assert [m["content"] for m in data["profiles"][0]["messages"]] == ["我的话 🐱"]


def test_user_cannot_export_another_users_data(client, profile, bob):
    client.force_login(bob)
    assert client.get(reverse("data_export"), {"user": "alice"}).status_code == 403


def test_user_export_never_includes_another_users_profile(client, profile, bob):
    MessageFactory(profile=profile, content="alice only")
    client.force_login(bob)
    response = client.get(reverse("data_export"), {"profile": "owner"})
    assert response.status_code == 404


def test_staff_can_export_any_users_data(client, profile, django_user_model):
    MessageFactory(profile=profile, content="alice line")
    staff = django_user_model.objects.create_user(username="staff", password="pw-staff-123", is_staff=True)
    client.force_login(staff)
    data = json.loads(client.get(reverse("data_export"), {"user": "alice"}).content)
    assert data["profiles"][0]["messages"][0]["content"] == "alice line"


def test_upload_shows_a_dry_run_preview_and_writes_nothing(client, profile, bob, storage):
    MessageFactory(profile=profile, content="x")
    response = _preview_as(client, bob, profile)
    assert response.status_code == 200
    assert "Preview" in response.content.decode()
    assert not Message.objects.filter(profile__user=bob).exists()


def test_the_preview_names_each_kind_in_the_persons_language(client, profile, bob, storage):
    MessageFactory(profile=profile, content="x")
    client.force_login(profile.user)
    export = json.loads(client.get(reverse("data_export")).content)
    client.force_login(bob)
    zh = client.post(reverse("data_import_preview"), {"export": _upload(export)}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    html = zh.content.decode()
    assert "<td>消息</td>" in html and "<td>旧版片段</td>" in html and "<td>卡片</td>" in html
    assert not any(f"<td>{kind}</td>" in html for kind in KINDS)  # none left as its field name
    en = client.post(reverse("data_import_preview"), {"export": _upload(export)}).content.decode()
    assert "<td>legacy fragments</td>" in en and "<td>the companion card</td>" in en


def test_apply_after_preview_imports_into_own_profiles(client, profile, bob, storage):
    MessageFactory(profile=profile, content="carried over")
    preview = _preview_as(client, bob, profile)
    token = preview.context["token"]
    response = _apply(client, token)
    assert response.status_code == 200 and response.context["progress"]["state"] == "done"
    assert "Imported" in response.content.decode()
    assert list(Message.objects.filter(profile__user=bob).values_list("content", flat=True)) == ["carried over"]
    assert Message.objects.filter(profile__user=profile.user).count() == 1


def test_user_cannot_import_into_another_user(client, profile, bob, storage):
    client.force_login(bob)
    response = client.post(reverse("data_import_preview"), {"user": "alice", "export": _upload({})})
    assert response.status_code == 403


def test_upload_of_a_non_export_is_refused_with_a_message(client, profile, storage):
    client.force_login(profile.user)
    response = client.post(reverse("data_import_preview"), {"export": _upload({"format": "nope"})})
    assert response.status_code == 400
    assert "not a Previously export" in response.content.decode()


def _refused_in_chinese(client, profile) -> str:
    """A file that is no export, previewed by a person whose page is in Chinese: the page."""
    client.force_login(profile.user)
    response = client.post(reverse("data_import_preview"), {"export": _upload({"format": "nope"})},
                           HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = response.content.decode()
    assert response.status_code == 400
    assert "无法导入此文件；没有写入任何内容。" in page and "这不是 Previously 的导出文件" in page
    assert "not a Previously export" not in page
    return page


def test_a_refused_import_is_explained_in_the_persons_language(client, profile, storage):
    """The lead sentence is translated, and so is the checker's detail (issue 25 point 7, U-series)."""
    _refused_in_chinese(client, profile)
    response = client.post(reverse("data_import_preview"), {}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "请选择要上传的导出文件。" in response.content.decode()


@pytest.mark.django_db
def test_an_oversize_upload_is_refused_with_a_clear_message_and_nothing_written(client, settings):
    from memory.models import Profile
    from tests.factories import UserFactory

    settings.PREVIOUSLY_MAX_IMPORT_BYTES = 100
    user = UserFactory()
    client.force_login(user)
    before = Profile.objects.count()
    response = client.post(reverse("data_import_preview"), {"export": SimpleUploadedFile("x.json", b"{" + b" " * 200 + b"}")})
    assert response.status_code == 400
    assert "the limit is 100 bytes" in response.content.decode()
    assert Profile.objects.count() == before


def _five_lines_previewed(client, profile, bob, settings) -> str:
    """Five lines of `profile` previewed by bob, to be applied in batches of two: the token."""
    settings.PREVIOUSLY_IMPORT_BATCH_ROWS = 2
    for n in range(5):
        MessageFactory(profile=profile, content=f"line {n}")
    return _preview_as(client, bob, profile).context["token"]


def _fail_in_the_second_message_batch(writes: list):
    """A database wrapper: the second batch of message inserts fails as a locked database would."""
    def wrapper(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("INSERT INTO \"MEMORY_MESSAGE\""):
            writes.append(sql)
            if len(writes) == 2:
                raise OperationalError("database is locked")
        return execute(sql, params, many, context)
    return wrapper


def test_an_apply_stopped_by_a_database_error_says_what_was_kept_and_to_import_again(client, profile, bob, storage,
                                                                                   settings):
    """S4: the apply writes in short batches; a database error part-way keeps the batches
    before it, and the page says so — importing the same file again finishes it (X2)."""
    token = _five_lines_previewed(client, profile, bob, settings)
    with connection.execute_wrapper(_fail_in_the_second_message_batch([])):
        response = _apply(client, token)
    page = response.content.decode()
    assert response.context["progress"]["state"] == "stopped"
    assert "stopped while writing messages" in page and "Apply it again to finish" in page
    assert Message.objects.filter(profile__user=bob).count() == 2  # the first batch stays
    again = _preview_as(client, bob, profile)
    assert again.context["preview"].counts["messages"]["created"] == 3
    _apply(client, again.context["token"])
    assert sorted(Message.objects.filter(profile__user=bob).values_list("content", flat=True)) == [
        f"line {n}" for n in range(5)]


def test_an_interrupted_apply_resumes_from_the_same_preview(client, profile, bob, storage, settings, tmp_path):
    """Issue 25 point 6: a database error part-way keeps the preview; applying the same token
    again finishes the import, without uploading the file again, and nothing is doubled."""
    token = _five_lines_previewed(client, profile, bob, settings)
    with connection.execute_wrapper(_fail_in_the_second_message_batch([])):
        stopped = _apply(client, token)
    assert stopped.context["progress"]["state"] == "stopped" and stopped.context["resume"] == token
    assert "Finish this import" in stopped.content.decode()
    assert Message.objects.filter(profile__user=bob).count() == 2
    finished = _apply(client, token)
    assert finished.context["progress"]["state"] == "done" and _created(finished) == 3
    assert sorted(Message.objects.filter(profile__user=bob).values_list("content", flat=True)) == [
        f"line {n}" for n in range(5)]
    assert _stored(tmp_path) == []  # a finished apply removes its preview


def test_the_apply_runs_in_the_background_and_its_page_shows_how_far_it_is(client, profile, bob, storage, settings,
                                                                          monkeypatch):
    """Issue 24 point 6 (X2, S4): the apply is a task that writes its progress, batch by batch;
    the request sends the person to a page that polls it (htmx), with a bar and the stage."""
    token = _five_lines_previewed(client, profile, bob, settings)
    monkeypatch.setattr(progress, "EVERY", 0)
    written, real_write = [], progress.write
    monkeypatch.setattr(progress, "write", lambda t, state: written.append(dict(state)) or real_write(t, state))
    sent = client.post(reverse("data_import_apply"), {"token": token})
    assert sent.status_code == 302 and sent["Location"] == reverse("data_import_progress", args=[token])
    running = [(st["stage"], st["done"], st["total"]) for st in written if st["state"] == "running"]
    assert ("writing messages", 2, 5) in running and ("writing messages", 5, 5) in running
    assert written[0]["state"] == "queued" and written[-1]["state"] == "done"
    # The page while it runs, as the poll fetches it, in English and in Chinese.
    real_write(token, {"state": "running", "stage": "writing messages", "done": 2, "total": 5})
    poll = client.get(reverse("data_import_progress", args=[token]), HTTP_HX_REQUEST="true")
    html = poll.content.decode()
    assert f'hx-get="{reverse("data_import_progress", args=[token])}"' in html and 'hx-trigger="load delay:1s"' in html
    assert '<progress id="import-bar" max="5" value="2">' in html and "Writing messages: 2 of 5." in html
    assert "<h1>" not in html  # the partial alone
    assert 'name="export"' not in html  # no new upload while this one is read
    with translation.override("zh-hans"):
        real_write(token, {"state": "running", "stage": kind_shown("messages"), "done": 2, "total": 5})
    zh = client.get(reverse("data_import_progress", args=[token]), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "正在导入" in zh and "2 / 5" in zh
    # Ended, it stops polling and shows the report.
    real_write(token, written[-1])
    done = client.get(reverse("data_import_progress", args=[token])).content.decode()
    assert "hx-get" not in done.split('id="import-progress"')[1].split(">")[0] and "Imported" in done
    # The poll that finds it ended brings the upload form back beside the report (out of band),
    # as a reload of the page shows it.
    ended = client.get(reverse("data_import_progress", args=[token]), HTTP_HX_REQUEST="true").content.decode()
    assert "Imported" in ended and "<h1>" not in ended
    upload = ended.split('<div id="import-upload" hx-swap-oob="true">')[1]
    assert 'name="export"' in upload and 'name="user"' not in upload  # the person's own account
    assert 'name="export"' in done and "hx-swap-oob" not in done


def test_an_apply_under_way_is_not_started_twice(client, profile, bob, storage, settings, monkeypatch):
    token = _five_lines_previewed(client, profile, bob, settings)
    started = []
    monkeypatch.setattr(views, "apply_full", SimpleNamespace(enqueue=lambda *args: started.append(args)))
    for _ in range(3):
        assert client.post(reverse("data_import_apply"), {"token": token}).status_code == 302
    assert len(started) == 1 and progress.read(token)["state"] == "queued"


def test_no_new_upload_replaces_the_one_an_apply_is_reading(client, profile, bob, storage, settings, monkeypatch,
                                                           tmp_path):
    """A second upload while the apply reads the first would remove the first part-way (one
    pending import per person): it is refused, and the page under way offers no upload form."""
    token = _five_lines_previewed(client, profile, bob, settings)
    monkeypatch.setattr(views, "apply_full", SimpleNamespace(enqueue=lambda *args: None))
    running = client.post(reverse("data_import_apply"), {"token": token}, follow=True).content.decode()
    assert 'name="export"' not in running
    refused = _preview_as(client, bob, profile)
    assert refused.status_code == 400 and "An import of yours is under way" in refused.content.decode()
    assert _stored(tmp_path) == [f"{token}.json"]  # the upload under way, and no other


def test_an_apply_that_went_silent_is_shown_as_stopped_with_the_button_to_finish(client, profile, bob, storage,
                                                                              settings, monkeypatch):
    """A server restarted mid-apply leaves "running" behind: after SILENT seconds without a word
    the page says it stopped, offers to finish it from the same preview, and a new apply starts."""
    token = _five_lines_previewed(client, profile, bob, settings)
    started = []
    monkeypatch.setattr(views, "apply_full", SimpleNamespace(enqueue=lambda *args: started.append(args)))
    client.post(reverse("data_import_apply"), {"token": token})
    progress.write(token, {"state": "running", "stage": "writing messages", "done": 2, "total": 5})
    stale = time.time() - progress.SILENT - 1
    os.utime(default_storage.path(f"imports/{token}.progress.json"), (stale, stale))
    page = client.get(reverse("data_import_progress", args=[token]))
    html = page.content.decode()
    assert page.context["progress"]["state"] == "stopped" and "It gave no news for 10 minutes." in html
    assert page.context["resume"] == token and "Finish this import" in html
    client.post(reverse("data_import_apply"), {"token": token})
    assert len(started) == 2


def test_the_progress_page_is_only_the_sessions_own_apply(client, profile, bob, storage, settings):
    token = _five_lines_previewed(client, profile, bob, settings)
    assert client.get(reverse("data_import_progress", args=[token])).status_code == 404  # not applied here
    _apply(client, token)
    other = type(client)()
    other.force_login(bob)  # the same person, another session
    assert other.get(reverse("data_import_progress", args=[token])).status_code == 404
    assert client.get(reverse("data_import_progress", args=["u1-t1-" + "0" * 32])).status_code == 404


def _stored(storage_root) -> list[str]:
    """The stored uploads (an apply's progress, which its page reads, stays until swept)."""
    folder = storage_root / "imports"
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(".progress.json")) if folder.exists() else []


def test_pending_previews_are_per_person_one_each_and_go_at_logout(client, profile, bob, storage, tmp_path):
    """Issue 24 point 7: five logins of one person leave at most one pending upload (not one per
    session), and logging out removes it; another person's stays."""
    alice = profile.user
    MessageFactory(profile=profile, content="x")
    client.force_login(alice)
    export = json.loads(client.get(reverse("data_export")).content)
    client.force_login(bob)
    client.post(reverse("data_import_preview"), {"export": _upload(export)})
    for _ in range(5):
        other = type(client)()
        other.force_login(alice)  # a new session each time
        assert other.post(reverse("data_import_preview"), {"export": _upload(export)}).status_code == 200
    stored = _stored(tmp_path)
    assert len(stored) == 2  # one of alice's, one of bob's
    latest = other
    assert latest.post(reverse("logout")).status_code in (200, 302)
    assert len(_stored(tmp_path)) == 1 and _stored(tmp_path)[0].startswith(f"u{bob.pk}-")
    # From another session, bob's one preview applies.
    token = _stored(tmp_path)[0].removesuffix(".json")
    again = type(client)()
    again.force_login(bob)
    assert _apply(again, token).context["progress"]["state"] == "done"
    assert Message.objects.filter(profile__user=bob).count() == 1


def test_an_export_with_images_downloads_as_a_zip_and_uploads_back(client, profile, bob, storage):
    """Issue 28 point 4: with an image the download is a zip of export.json and the image file;
    the data page previews and applies that zip, the image re-encoded into bob's own files."""
    picture = io.BytesIO()
    Image.new("RGB", (12, 9), (30, 160, 90)).save(picture, "PNG")
    store_image_message(profile=profile, mid="c_00000000000000e1", data=picture.getvalue(), caption="猫 🐱")
    client.force_login(profile.user)
    response = client.get(reverse("data_export"))
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].endswith('.zip"')
    body = b"".join(response.streaming_content)
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert sorted(archive.namelist()) == ["export.json", f"images/{profile.key}/c_00000000000000e1.png"]
    client.force_login(bob)
    upload = SimpleUploadedFile("e.zip", body, "application/zip")
    preview = client.post(reverse("data_import_preview"), {"export": upload})
    assert preview.status_code == 200 and preview.context["preview"].counts["messages"]["created"] == 1
    assert not Message.objects.filter(profile__user=bob).exists()
    _apply(client, preview.context["token"])
    line = Message.objects.get(profile__user=bob)
    assert line.content == "猫 🐱" and line.attachment["path"].startswith(f"images/{line.profile_id}/")


def test_the_apply_after_a_preview_does_not_check_the_records_again(client, profile, bob, storage, monkeypatch):
    """Issue 24 point 6 (SPEC S4): the preview checked every record of the stored file, so its
    apply reads the file once more, to write, without a second checking pass (each pass over a
    million records was a minute); what it writes is the same."""
    for n in range(5):
        MessageFactory(profile=profile, content=f"第 {n} 行 line 🐱")
    token = _preview_as(client, bob, profile).context["token"]
    asked = []
    checked = write_module.storable
    monkeypatch.setattr(write_module, "storable", lambda row: asked.append(row) or checked(row))
    applied = _apply(client, token)
    assert _created(applied) == 5
    assert asked == []
    assert sorted(Message.objects.filter(profile__user=bob).values_list("content", flat=True)) == [
        f"第 {n} 行 line 🐱" for n in range(5)]


def test_the_apply_of_a_zip_export_after_its_preview_does_not_check_again(client, profile, bob, storage, monkeypatch):
    """Issue 24 point 6 with issue 28 point 4: a zip export's apply after its preview skips the
    checking pass too, and still stores its image, re-encoded."""
    picture = io.BytesIO()
    Image.new("RGB", (12, 9), (30, 160, 90)).save(picture, "PNG")
    store_image_message(profile=profile, mid="c_00000000000000e2", data=picture.getvalue(), caption="狗")
    client.force_login(profile.user)
    body = b"".join(client.get(reverse("data_export")).streaming_content)
    client.force_login(bob)
    preview = client.post(reverse("data_import_preview"), {"export": SimpleUploadedFile("e.zip", body, "application/zip")})
    asked = []
    checked = write_module.storable
    monkeypatch.setattr(write_module, "storable", lambda row: asked.append(row) or checked(row))
    applied = _apply(client, preview.context["token"])
    assert _created(applied) == 1
    assert asked == []
    line = Message.objects.get(profile__user=bob)
    assert line.content == "狗" and line.attachment["path"].startswith(f"images/{line.profile_id}/")


# --- beside a live server the preview and the apply run in a child process (S4, issue 24 point 6) ---


@pytest.fixture
def tasks_on_server_threads(settings):
    settings.TASKS = {"default": {"BACKEND": "previously.task_backend.ThreadPoolBackend"}}


@pytest.fixture
def applies_at_once(monkeypatch):
    """The apply's task (its child included) run to its end inside the request: the test reads
    how it ended, and leaves no task running after it."""
    real = views.apply_full
    monkeypatch.setattr(views, "apply_full", SimpleNamespace(enqueue=lambda *args: real.call(*args)))


@pytest.fixture
def not_in_this_process(monkeypatch):
    def not_here(*args, **kwargs):
        raise AssertionError("the import ran in the server's process")

    monkeypatch.setattr(views, "import_full", not_here)


@pytest.mark.django_db(transaction=True)
def test_beside_the_server_the_full_import_is_previewed_and_applied_in_a_child_process(
        client, profile, bob, storage, tasks_on_server_threads, applies_at_once, not_in_this_process):
    """Reading a whole upload holds the GIL and takes memory: beside the server a child does it
    (this process's importer made to fail), and the page shows the child's report as before."""
    said = ["第一句 🐱", "second line, mixed 中文", "third ✨"]
    for text in said:
        MessageFactory(profile=profile, content=text)
    preview = _preview_as(client, bob, profile)
    assert preview.status_code == 200, preview.content.decode()[-2000:]
    assert preview.context["preview"].counts["messages"]["created"] == 3
    assert not Message.objects.filter(profile__user=bob).exists()
    applied = _apply(client, preview.context["token"])
    assert _created(applied) == 3
    assert sorted(Message.objects.filter(profile__user=bob).values_list("content", flat=True)) == sorted(said)


@pytest.mark.django_db(transaction=True)
def test_a_child_refusal_is_shown_in_the_persons_language(client, profile, storage, tasks_on_server_threads,
                                                          not_in_this_process):
    _refused_in_chinese(client, profile)


@pytest.mark.django_db(transaction=True)
def test_an_apply_ends_as_its_child_says_whatever_was_written_to_its_progress_since(
        client, profile, bob, storage, settings, tasks_on_server_threads, monkeypatch):
    """The task takes how the apply ended from its child's answer, not from the progress file:
    a write to that file after the child's own end (the browser journey's made-up "running"
    state, which the last CI run lost this way) is not mistaken for a child that died."""
    token = _five_lines_previewed(client, profile, bob, settings)
    real_run, later = child.run, {"state": "running", "stage": "x", "done": 1, "total": 2}

    def then_written_to(*args, **kwargs):
        done = real_run(*args, **kwargs)
        progress.write(token, later)
        return done

    monkeypatch.setattr(child, "run", then_written_to)
    assert views.apply_full.call(token, bob.pk, "en") == "done"
    assert progress.read(token) == later  # not overwritten with "stopped"
    assert Message.objects.filter(profile__user=bob).count() == 5


@pytest.mark.django_db(transaction=True)
def test_an_apply_whose_child_dies_keeps_the_preview_to_apply_again(client, profile, bob, storage, settings,
                                                                     tasks_on_server_threads, applies_at_once,
                                                                     monkeypatch):
    """A child that ends without saying how (killed, out of memory: here a program that fails at
    once) is an interrupted apply: the page says so with its exit code, and the same preview
    applied again finishes the import."""
    token, python = _five_lines_previewed(client, profile, bob, settings), sys.executable
    monkeypatch.setattr(sys, "executable", shutil.which("false"))
    stopped = _apply(client, token)
    assert stopped.context["progress"]["state"] == "stopped" and stopped.context["resume"] == token
    assert "its process ended with code 1" in stopped.content.decode()
    monkeypatch.setattr(sys, "executable", python)
    finished = _apply(client, token)
    assert _created(finished) == 5
