"""Bringing history in (SPEC H1; issue 27 points 1-4, 6, 9): every format, read from realistic
fixtures, previewed, written, and imported again."""

import copy
import hashlib
import io
import json
import zipfile
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from PIL import Image

from memory.card.store import live_card
from memory.interop.history import HistoryImport, apply, detect
from memory.interop.history.shapes import Skip
from memory.models import CardSnapshot, EvolutionRun, Experience, Message, Profile, Slice, Tombstone
from tests.memory.history import samples as s

pytestmark = pytest.mark.django_db


def run(path, user, **kw):
    with HistoryImport(path, user=user, **kw) as imp:
        return apply(imp)


def preview(path, user, **kw):
    with HistoryImport(path, user=user, **kw) as imp:
        return imp.preview()


def lines(profile, **kw):
    return list(Message.objects.filter(profile=profile, deleted_at__isnull=True, **kw).order_by("created_at", "id"))


# --- ChatGPT: the visible path, skips, alternatives, times (points 1, 2) ---------------------------------------------

def test_chatgpt_zip_visible_path_only(tmp_path, user, profile):
    path = s.chatgpt_zip(tmp_path / "export.zip", [s.chatgpt_conversation()], images={"file-AbC123-photo.png": s.png()})
    report = run(path, user)
    assert report.app == "chatgpt"
    texts = [m.content for m in lines(profile)]
    assert texts == ["周末想去杭州，有什么建议？", "可以去西湖和灵隐寺。", "Look at this photo", "A lovely lake view.",
                     "def f():\n    pass"]
    t = report.total()
    assert t.lines == 5 and t.alternatives == 1
    assert t.skipped[Skip.SYSTEM] == 1 and t.skipped[Skip.CUSTOM_INSTRUCTIONS] == 1 and t.skipped[Skip.APP_MEMORY] == 1
    assert t.skipped[Skip.TOOL] == 2 and t.skipped[Skip.REASONING] == 1 and t.skipped[Skip.EMPTY] == 1
    assert t.skipped[Skip.BRANCH] == 2  # the edited prompt and its reply
    assert t.images_found == 1 and t.images_missing == 0


def test_chatgpt_regenerated_reply_is_a_hidden_alternative(tmp_path, user, profile):
    run(s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()]), user)
    user_line = Message.objects.get(profile=profile, content="周末想去杭州，有什么建议？")
    replies = Message.objects.filter(reply_of=user_line).order_by("created_at")
    assert [(m.content, m.deleted_at is not None) for m in replies] == [
        ("First draft: go to West Lake.", True), ("可以去西湖和灵隐寺。", False)]
    from memory.models import RecallDocument
    assert not RecallDocument.objects.filter(message__content__startswith="First draft").exists()
    assert RecallDocument.objects.filter(message__content="可以去西湖和灵隐寺。").exists()


def test_chatgpt_times_to_the_second_and_null_time_takes_the_previous(tmp_path, user, profile):
    run(s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()]), user)
    by = {m.content: m.created_at for m in lines(profile)}
    t0 = datetime.fromtimestamp(s.T0, tz=UTC)
    assert by["周末想去杭州，有什么建议？"] == t0
    assert by["A lovely lake view."] == datetime.fromtimestamp(s.T0 + 70, tz=UTC)  # null: the photo line's time


def test_chatgpt_image_in_the_zip_becomes_an_image_message(tmp_path, user, profile):
    run(s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()], images={"file-AbC123-photo.png": s.png()}), user)
    photo = Message.objects.get(profile=profile, content="Look at this photo")
    assert photo.message_type == Message.Type.IMAGE
    assert photo.attachment["content_type"] == "image/png" and photo.attachment["width"] == 8


def test_chatgpt_missing_image_is_counted_and_the_text_kept(tmp_path, user, profile):
    report = run(s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()]), user)
    assert report.total().images_missing == 1
    photo = Message.objects.get(profile=profile, content="Look at this photo")
    assert photo.message_type == Message.Type.TEXT


def test_chatgpt_split_conversation_files_read_in_order(tmp_path, user, profile):
    convs = [s.chatgpt_conversation(cid=f"c-{i}", t0=s.T0 + i * 86400) for i in range(3)]
    report = run(s.chatgpt_zip(tmp_path / "e.zip", convs, split=True), user)
    assert [c.key for c in report.conversations] == ["c-0", "c-1", "c-2"]


def test_chatgpt_plain_conversations_json_is_recognised_by_content(tmp_path, user, profile):
    path = tmp_path / "whatever.txt"
    path.write_text(json.dumps([s.chatgpt_conversation()]), encoding="utf-8")
    assert preview(path, user).app == "chatgpt"


def test_chatgpt_memory_becomes_candidate_experiences_citing_the_import(tmp_path, user, profile):
    report = run(s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()]), user)
    exps = Experience.objects.filter(profile=profile).order_by("content")
    assert report.experiences_new == 3
    assert sorted(e.content for e in exps) == ["1. [2024-05-01]. Has a cat named Mochi.", "Answer briefly.",
                                               "I live in Shanghai and teach piano."]
    assert {e.status for e in exps} == {Experience.Status.CANDIDATE}
    assert all(e.legacy_extra["import"]["file"] == "e.zip" for e in exps)
    assert not Message.objects.filter(profile=profile, content__contains="Mochi").exists()
    assert exps[0].history.first().actor == "import"


# --- conversations stay apart; idempotency, tombstones, interruption (point 3) ---------------------------------------

def test_each_conversation_its_own_slices_split_by_the_gap(tmp_path, user, profile):
    convs = [s.chatgpt_conversation(cid="a", t0=s.T0), s.chatgpt_conversation(cid="b", t0=s.T0 + 60)]
    run(s.chatgpt_zip(tmp_path / "e.zip", convs), user)
    slices = Slice.objects.filter(profile=profile)
    # Each conversation: its first lines, then 4 hours later the code line (past the 30 min gap).
    assert slices.count() == 4
    assert {s_.close_reason for s_ in slices} == {Slice.CloseReason.IMPORT}
    for sl in slices:
        assert len({m.mid[:3] for m in sl.messages.all()}) == 1
    keys_by_slice = [set(Message.objects.filter(slice=sl).values_list("source_id", flat=True)) for sl in slices]
    assert all(k == {"chatgpt"} for k in keys_by_slice)


def test_live_chat_is_never_joined(tmp_path, user, profile):
    from memory.archive import archive_message
    live = archive_message(profile=profile, mid="c_00000000000000aa", speaker="user", content="live line",
                           created_at=datetime.fromtimestamp(s.T0 + 2, tz=UTC))
    run(s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()]), user)
    assert Message.objects.filter(slice=live.message.slice).count() == 1


def test_reimport_adds_and_changes_nothing(tmp_path, user, profile):
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()], images={"file-AbC123-x.png": s.png()})
    first = run(path, user)
    before = list(Message.objects.order_by("pk").values())
    slices = list(Slice.objects.order_by("pk").values())
    again = run(path, user)
    assert first.written == 6 and again.written == 0 and again.slices == 0
    assert again.total().already == 6 and again.total().new == 0 and again.experiences_new == 0
    assert list(Message.objects.order_by("pk").values()) == before
    assert list(Slice.objects.order_by("pk").values()) == slices


def test_tombstoned_line_stays_out(tmp_path, user, profile):
    from memory.deletion import hard_delete_message
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()])
    run(path, user)
    gone = Message.objects.get(profile=profile, content="可以去西湖和灵隐寺。")
    hard_delete_message(gone) if callable(hard_delete_message) else None
    assert Tombstone.objects.filter(profile=profile, object_id=gone.mid).exists()
    report = run(path, user)
    assert report.written == 0
    assert report.total().tombstoned >= 1
    assert not Message.objects.filter(profile=profile, mid=gone.mid).exists()


def test_interrupted_import_is_finished_by_running_it_again(tmp_path, user, profile, settings, monkeypatch):
    settings.PREVIOUSLY_HISTORY_BATCH_ROWS = 2
    convs = [s.chatgpt_conversation(cid=f"c-{i}", t0=s.T0 + i * 86400) for i in range(3)]
    path = s.chatgpt_zip(tmp_path / "e.zip", convs)
    from memory.interop.history import write
    real, calls = write._Writer._write, []

    def failing(self, *args):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("power cut")
        return real(self, *args)

    monkeypatch.setattr(write._Writer, "_write", failing)
    with pytest.raises(RuntimeError):
        run(path, user)
    partial = Message.objects.filter(profile=profile).count()
    assert 0 < partial < 18
    monkeypatch.setattr(write._Writer, "_write", real)
    report = run(path, user)
    assert Message.objects.filter(profile=profile).count() == 18
    assert report.written == 18 - partial
    # The finished conversation's segments are each one slice still.
    assert Slice.objects.filter(profile=profile).count() == 6


# --- the other formats -----------------------------------------------------------------------------------------------

def test_claude_every_message_text(tmp_path, user, profile):
    import zipfile
    path = tmp_path / "claude.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("conversations.json", json.dumps(s.claude_conversations()))
        z.writestr("users.json", "[]")
        z.writestr("projects.json", "[]")
    report = run(path, user)
    assert report.app == "claude"
    got = [(m.speaker, m.content, m.created_at) for m in lines(profile)]
    assert got == [
        ("user", "How long should I practise scales?", datetime(2025, 2, 1, 9, 0, 1, tzinfo=UTC)),
        ("assistant", "Ten minutes a day is plenty.", datetime(2025, 2, 1, 9, 0, 9, tzinfo=UTC)),
        ("user", "谢谢！", datetime(2025, 2, 1, 11, 30, tzinfo=UTC)),
    ]
    t = report.total()
    assert t.skipped[Skip.REASONING] == 1 and t.skipped[Skip.TOOL] == 1
    assert t.skipped[Skip.ATTACHMENT_TEXT] == 1 and t.skipped[Skip.EMPTY] == 1
    assert Slice.objects.filter(profile=profile).count() == 2  # 09:00 and 11:30


def test_openwebui_path_from_current_id(tmp_path, user, profile):
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps(s.openwebui_chats()), encoding="utf-8")
    report = run(path, user)
    assert report.app == "openwebui"
    assert [m.content for m in lines(profile)] == ["Hi there", "Hey! (second)", "Tell me a joke"]
    hidden = Message.objects.get(profile=profile, content="Hello! (first)")
    assert hidden.deleted_at is not None and hidden.reply_of.content == "Hi there"
    t = report.total()
    assert t.skipped[Skip.SYSTEM_PROMPT] == 1 and t.skipped[Skip.ERROR] == 1 and t.alternatives == 1


def test_sillytavern_wall_clock_in_the_companions_zone(tmp_path, user, profile):
    profile.tz = "Asia/Shanghai"
    profile.save()
    report = run(s.write_jsonl(tmp_path / "Mia - chat.jsonl", s.sillytavern_lines()), user)
    assert report.app == "sillytavern"
    got = [(m.speaker, m.content) for m in lines(profile)]
    assert got == [("assistant", "Hello, Alex!"), ("user", "Good evening."), ("assistant", "Evening! Tea?")]
    first = lines(profile)[0]
    assert first.created_at == datetime(2025, 6, 14, 18, 22, tzinfo=ZoneInfo("Asia/Shanghai"))
    t = report.total()
    assert t.skipped[Skip.NARRATION] == 1 and t.skipped[Skip.SYSTEM] == 1 and t.skipped[Skip.REASONING] == 1
    assert t.alternatives == 1  # "Evening!" (the empty swipe is nothing)
    assert t.skipped[Skip.BRANCH] == 1  # the greeting's other swipe: an alternate greeting, counted
    alt = Message.objects.get(profile=profile, content="Evening!")
    assert alt.deleted_at is not None and alt.reply_of.content == "Good evening."


def test_sillytavern_iso_dates_are_absolute(tmp_path, user, profile):
    dates = ("2025-06-14T10:22:00.000Z", "2025-06-14T10:23:00.000Z", "2025-06-14T10:25:00.000Z")
    run(s.write_jsonl(tmp_path / "c.jsonl", s.sillytavern_lines(dates)), user)
    assert lines(profile)[0].created_at == datetime(2025, 6, 14, 10, 22, tzinfo=UTC)


# --- preview (point 6) and the command -------------------------------------------------------------------------------

def test_preview_writes_nothing_and_says_everything(tmp_path, user, profile):
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()])
    report = preview(path, user)
    assert Message.objects.count() == 0 and Experience.objects.count() == 0
    j = report.as_json()
    assert j["dry_run"] and j["companion"] == "owner" and j["conversations"] == 1
    assert j["total"]["lines"] == 5 and j["total"]["alternatives"] == 1 and j["total"]["new"] == 6
    assert j["total"]["images_missing"] == 1
    assert j["total"]["first"].startswith("2024-06-10") and j["experiences"]["new"] == 3


def test_command_dry_run_and_apply_to_a_new_companion(tmp_path, user):
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()])
    out = tmp_path / "r.json"
    call_command("import_history", str(path), "--user", "alice", "--profile", "mia", "--dry-run",
                 "--report-json", str(out))
    assert not Profile.objects.filter(key="mia").exists()
    assert json.loads(out.read_text())["dry_run"] is True
    call_command("import_history", str(path), "--user", "alice", "--profile", "mia")
    mia = Profile.objects.get(user=user, key="mia")
    assert Message.objects.filter(profile=mia).count() == 6


def test_command_refusal_names_file_and_record(tmp_path, user):
    conv = s.chatgpt_conversation()
    conv["mapping"]["u1"]["parent"] = "a3"  # the parents loop
    conv["mapping"]["root"]["parent"] = "a3"
    path = s.chatgpt_zip(tmp_path / "loop.zip", [conv])
    with pytest.raises(CommandError, match=r"refused: loop\.zip:conversations\.json\[0\] \(c-1\): the parents form a loop"):
        call_command("import_history", str(path), "--user", "alice")
    assert Message.objects.count() == 0


def test_an_image_member_that_is_not_an_image_or_too_large_is_counted_missing(tmp_path, user, profile, settings):
    settings.PREVIOUSLY_IMAGE_MAX_BYTES = 1000
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()],
                         images={"file-AbC123-photo.png": b"\0" * 5000})
    report = run(path, user)
    assert report.total().images_missing == 1 and report.total().images_found == 0
    photo = Message.objects.get(profile=profile, content="Look at this photo")
    assert photo.message_type == Message.Type.TEXT


# --- what the readers must get right, each shown failing when it is wrong (issue 27 audit) ---------------------------

def hidden_and_multimodal_conversation():
    """A short ChatGPT conversation with a hidden user line and a hidden assistant line (text
    content, `metadata.is_visually_hidden_from_conversation`, as ChatGPT writes a prompt it
    injected and a canned reply), and a multimodal message with several text parts."""
    m = {}

    def add(nid, parent, children, message=None):
        m[nid] = s.node(nid, parent, children, message)

    add("root", None, ["h1"])
    add("h1", "root", ["h2"], s.gmsg("h1", "user", ["(injected) the person's locale is zh-CN"], t=s.T0, hidden=True))
    add("h2", "h1", ["u1"], s.gmsg("h2", "assistant", ["(canned) noted"], t=s.T0 + 1, hidden=True))
    add("u1", "h2", ["a1"], s.gmsg("u1", "user", ["First part", {"content_type": "image_asset_pointer",
                                                                  "asset_pointer": "sediment://file_00000000ab"},
                                                   "second part", "第三部分"], t=s.T0 + 2, ctype="multimodal_text"))
    add("a1", "u1", [], s.gmsg("a1", "assistant", ["Seen."], t=s.T0 + 3))
    return {"title": "Hidden", "create_time": s.T0, "update_time": s.T0 + 3, "mapping": m, "current_node": "a1",
            "conversation_id": "hidden-1", "id": "hidden-1"}


def test_chatgpt_hidden_user_and_assistant_text_is_counted_never_stored(tmp_path, user, profile):
    report = run(s.chatgpt_zip(tmp_path / "e.zip", [hidden_and_multimodal_conversation()]), user)
    assert not Message.objects.filter(profile=profile, content__startswith="(").exists()
    assert report.total().skipped[Skip.HIDDEN] == 2
    assert report.total().lines == 2


def test_chatgpt_multimodal_text_parts_are_joined_by_a_newline(tmp_path, user, profile):
    report = run(s.chatgpt_zip(tmp_path / "e.zip", [hidden_and_multimodal_conversation()]), user)
    assert [m.content for m in lines(profile)] == ["First part\nsecond part\n第三部分", "Seen."]
    assert report.total().images_missing == 1  # the image part is dropped from the text


def test_chatgpt_split_members_are_read_in_number_order_whatever_the_zip_order(tmp_path, user, profile):
    path = tmp_path / "e.zip"
    numbers = (10, 2, 0)  # written to the zip out of order
    with zipfile.ZipFile(path, "w") as z:
        for n in numbers:
            conv = s.chatgpt_conversation(cid=f"c-{n:03d}", t0=s.T0 + n * 86400)
            z.writestr(f"conversations-{n:03d}.json", json.dumps([conv], ensure_ascii=False))
        z.writestr("user.json", "{}")
    report = run(path, user)
    assert [c.key for c in report.conversations] == ["c-000", "c-002", "c-010"]
    assert [c.record for c in report.conversations] == [
        "e.zip:conversations-000.json[0]", "e.zip:conversations-002.json[0]", "e.zip:conversations-010.json[0]"]


def test_split_member_numbers_are_ordered_as_numbers_not_as_strings():
    names = ["conversations-1000.json", "conversations-999.json", "conversations-010.json", "conversations-002.json"]
    assert detect._ordered(names) == ["conversations-002.json", "conversations-010.json", "conversations-999.json",
                                      "conversations-1000.json"]


def at(epoch_seconds: int) -> datetime:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC)


def test_openwebui_times_in_seconds_and_in_milliseconds(tmp_path, user, profile):
    seconds = s.openwebui_chats()[0]
    millis = copy.deepcopy(seconds)
    millis["id"], millis["created_at"] = "owui-ms", 1_740_000_000_000
    for node in millis["chat"]["history"]["messages"].values():
        node["timestamp"] = (node["timestamp"] - 1_730_000_000 + 1_740_000_000) * 1000 + 789
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps([seconds, millis]), encoding="utf-8")
    run(path, user)
    got = [(m.content, m.created_at) for m in lines(profile)]
    assert got == [
        ("Hi there", at(1_730_000_000)), ("Hey! (second)", at(1_730_000_050)), ("Tell me a joke", at(1_730_000_100)),
        ("Hi there", at(1_740_000_000)), ("Hey! (second)", at(1_740_000_050)), ("Tell me a joke", at(1_740_000_100)),
    ]
    alternatives = Message.objects.filter(profile=profile, content="Hello! (first)").order_by("created_at")
    assert [m.created_at for m in alternatives] == [at(1_730_000_005), at(1_740_000_005)]


def test_sillytavern_epoch_millisecond_send_dates(tmp_path, user, profile):
    profile.tz = "Asia/Shanghai"  # an absolute time: the zone must not move it
    profile.save()
    dates = (1_749_896_520_000, 1_749_896_580_123, 1_749_896_700_999)
    run(s.write_jsonl(tmp_path / "old.jsonl", s.sillytavern_lines(dates)), user)
    assert [(m.content, m.created_at) for m in lines(profile)] == [
        ("Hello, Alex!", datetime(2025, 6, 14, 10, 22, tzinfo=UTC)),
        ("Good evening.", datetime(2025, 6, 14, 10, 23, tzinfo=UTC)),
        ("Evening! Tea?", datetime(2025, 6, 14, 10, 25, tzinfo=UTC)),
    ]
    alt = Message.objects.get(profile=profile, content="Evening!")
    assert alt.created_at == datetime(2025, 6, 14, 10, 25, tzinfo=UTC)


def test_chatgpt_memory_and_custom_instructions_leave_the_card_unchanged(tmp_path, user, profile):
    card = live_card(profile)
    card.text, card.version = "## Now\n- Practises piano every evening", 3
    card.save()
    report = run(s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()]), user)
    assert report.experiences_new == 3
    card.refresh_from_db()
    assert (card.text, card.version) == ("## Now\n- Practises piano every evening", 3)
    assert "Mochi" not in card.text and "Shanghai" not in card.text
    assert not CardSnapshot.objects.filter(profile=profile).exists()
    assert not EvolutionRun.objects.filter(profile=profile).exists()


# --- images the other apps showed, counted missing (issue 27 audit point 5) -------------------------------------------

def test_claude_files_and_attachments_without_their_text_are_images_missing(tmp_path, user, profile):
    convs = s.claude_conversations()
    thanks = convs[0]["chat_messages"][3]
    thanks["files"] = [{"file_name": "cat.png"}]
    thanks["files_v2"] = [{"file_uuid": "f-1", "file_name": "cat.png", "file_kind": "image"}]  # the same file again
    thanks["attachments"] = [{"file_name": "scan.pdf", "file_size": 10, "extracted_content": ""}]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(convs), encoding="utf-8")
    report = run(path, user)
    t = report.total()
    assert (t.images_found, t.images_missing) == (0, 3)  # photo.jpg (a message with no text), cat.png, scan.pdf
    assert t.skipped[Skip.EMPTY] == 1 and t.skipped[Skip.ATTACHMENT_TEXT] == 1
    assert [m.content for m in lines(profile)] == ["How long should I practise scales?", "Ten minutes a day is plenty.",
                                                   "谢谢！"]


def test_openwebui_image_files_are_images_missing(tmp_path, user, profile):
    chats = s.openwebui_chats()
    nodes = chats[0]["chat"]["history"]["messages"]
    nodes["u2"]["files"] = [{"type": "image", "url": "data:image/png;base64,iVBORw0KGgo="},
                            {"type": "file", "file": {"id": "doc"}, "name": "notes.txt"}]
    nodes["u3"] = {"id": "u3", "parentId": "u1", "childrenIds": [], "role": "user", "content": "",
                   "files": [{"type": "image", "url": "/api/v1/files/abc/content"}], "timestamp": 1_730_000_001}
    nodes["u1"]["childrenIds"].append("u3")
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps(chats), encoding="utf-8")
    report = run(path, user)
    assert (report.total().images_found, report.total().images_missing) == (0, 1)  # u3 is off the path
    assert [m.content for m in lines(profile)] == ["Hi there", "Hey! (second)", "Tell me a joke"]


def owui_with_images(tmp_path, **files):
    """The sample Open WebUI export, its path messages given `files` (node id -> list)."""
    chats = s.openwebui_chats()
    nodes = chats[0]["chat"]["history"]["messages"]
    for nid, items in files.items():
        nodes[nid]["files"] = items
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps(chats), encoding="utf-8")
    return path


@pytest.mark.usefixtures("media_in_tmp")
def test_openwebui_data_url_image_is_found_and_becomes_an_image_message_shown_in_the_chat(tmp_path, user, profile,
                                                                                           client):
    """Issue 27 point 2, SPEC A7, H1: an image Open WebUI kept as a data: URL is in the file, so
    it is found; the line becomes an image message, re-encoded by the path zip members take
    (check_image), and the chat shows it to its person."""
    photo = s.png(color=(20, 160, 90))
    path = owui_with_images(tmp_path, u2=[{"type": "image", "url": s.data_url(photo), "name": "beach.png"}])

    before = preview(path, user)
    assert (before.total().images_found, before.total().images_missing) == (1, 0)
    report = run(path, user)

    assert (report.total().images_found, report.total().images_missing) == (1, 0)
    line = Message.objects.get(profile=profile, content="Tell me a joke")
    assert line.message_type == Message.Type.IMAGE
    attachment = line.attachment
    assert (attachment["content_type"], attachment["width"], attachment["height"]) == ("image/png", 8, 6)
    assert attachment["name"] == "beach.png"
    with default_storage.open(attachment["path"], "rb") as fh:
        stored = fh.read()
    assert hashlib.sha256(stored).hexdigest() == attachment["sha256"]  # what check_image wrote
    assert Image.open(io.BytesIO(stored)).getpixel((0, 0)) == (20, 160, 90)
    assert default_storage.exists(attachment["thumb"])
    client.force_login(user)
    past = client.get(reverse("chat_conversation", args=[line.slice.key]), {"profile": profile.key},
                      HTTP_HX_REQUEST="true").content.decode()
    assert f'src="{reverse("chat_image_thumb", args=[line.pk])}"' in past and 'alt="Tell me a joke"' in past
    shown = client.get(reverse("chat_image", args=[line.pk]))
    assert shown.status_code == 200 and shown["Content-Type"] == "image/png"


@pytest.mark.usefixtures("media_in_tmp")
def test_openwebui_data_urls_too_large_or_not_images_are_counted_by_kind_and_the_text_kept(tmp_path, user, profile,
                                                                                           settings):
    """Issue 27 point 2 and 9, S4: a data: URL over PREVIOUSLY_IMAGE_MAX_BYTES (judged before it
    is decoded), one whose header names more than PREVIOUSLY_IMAGE_MAX_PIXELS, one that is not
    base64, and one whose bytes are no picture are each an image missing and counted by kind,
    in the preview as in the apply; the lines keep their text and nothing else is written."""
    settings.PREVIOUSLY_IMAGE_MAX_BYTES = 2000
    settings.PREVIOUSLY_IMAGE_MAX_PIXELS = 300
    big, wide = io.BytesIO(), io.BytesIO()
    Image.effect_noise((64, 64), 90).save(big, "PNG")
    Image.new("RGB", (20, 20)).save(wide, "PNG")
    assert len(big.getvalue()) > 2000 and len(wide.getvalue()) < 2000
    path = owui_with_images(
        tmp_path,
        u1=[{"type": "image", "url": s.data_url(big.getvalue())}, {"type": "image", "url": s.data_url(wide.getvalue())}],
        u2=[{"type": "image", "url": "data:image/png;base64,this is not base64!"},
            {"type": "image", "url": s.data_url(b"hello, I am text")}],
    )

    for report in (preview(path, user), run(path, user)):
        t = report.total()
        assert (t.images_found, t.images_missing) == (0, 4)
        assert (t.skipped[Skip.IMAGE_TOO_LARGE], t.skipped[Skip.IMAGE_REFUSED]) == (2, 2)
    assert [(m.content, m.message_type) for m in lines(profile)] == [
        ("Hi there", Message.Type.TEXT), ("Hey! (second)", Message.Type.TEXT), ("Tell me a joke", Message.Type.TEXT)]
    assert not default_storage.exists(f"images/{profile.pk}")
    labels = dict(report.total().skipped_labelled)
    assert labels["images over the size limit"] == 2 and labels["images that are not a picture we take"] == 2


@pytest.mark.usefixtures("media_in_tmp")
def test_openwebui_preview_counts_data_urls_found_and_addresses_missing(tmp_path, user, profile):
    """Issue 27 point 6: the preview's images found / missing, per conversation and in total:
    a data: URL found (also in a message's `images`, counted once), a server address missing;
    a data: URL whose header passes but whose pixels are cut short turns from found to missing
    when the apply checks it (as a damaged zip member does), its line kept as text."""
    photo = s.data_url(s.png())
    cut = s.data_url(s.png()[:50])  # its header whole, its pixels cut short
    path = owui_with_images(tmp_path, u1=[{"type": "image", "url": photo}, {"type": "image", "url": "/api/v1/files/f1/content"}],
                            u2=[{"type": "image", "url": cut}])
    chats = json.loads(path.read_text())
    chats[0]["chat"]["history"]["messages"]["u1"]["images"] = [photo]  # the same picture again
    path.write_text(json.dumps(chats), encoding="utf-8")

    seen = preview(path, user)
    assert [(c.images_found, c.images_missing) for c in seen.conversations] == [(2, 1)]
    report = run(path, user)

    t = report.total()
    assert (t.images_found, t.images_missing, t.skipped[Skip.IMAGE_REFUSED]) == (1, 2, 1)
    assert Message.objects.get(profile=profile, content="Hi there").message_type == Message.Type.IMAGE
    assert Message.objects.get(profile=profile, content="Tell me a joke").message_type == Message.Type.TEXT


def test_sillytavern_extra_image_is_an_image_missing_and_moves_no_other_mid(tmp_path, user, profile):
    plain = s.sillytavern_lines()
    run(s.write_jsonl(tmp_path / "plain.jsonl", plain), user)
    pictured = copy.deepcopy(plain)
    pictured[2]["extra"] = {"image": "/user/images/Mia/Mia_2025-06-14@18h23m.png", "inline_image": True}
    picture_only = {"name": "Alex", "is_user": True, "is_system": False, "send_date": plain[2]["send_date"], "mes": "",
                    "extra": {"image": "/user/images/Mia/cat.jpg"}}
    pictured.insert(2, picture_only)  # same time and speaker as the next line
    other = Profile.objects.create(user=user, key="other")
    report = run(s.write_jsonl(tmp_path / "pictured.jsonl", pictured), user, profile_key="other")
    assert (report.total().images_found, report.total().images_missing) == (0, 2)
    assert [m.content for m in lines(other)] == [m.content for m in lines(profile)]
    mids = set(Message.objects.filter(profile=profile).values_list("mid", flat=True))
    assert set(Message.objects.filter(profile=other).values_list("mid", flat=True)) == mids
