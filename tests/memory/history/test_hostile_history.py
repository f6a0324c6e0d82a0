"""Hostile history files (issue 27 point 9, SPEC S4, S6): each refused naming the file, the
record and the problem, with nothing written."""

import json
import zipfile

import pytest

from memory.interop.history import HistoryImport, Refused, apply
from memory.models import Experience, Message, Profile, Slice
from tests.memory.history import samples as s

pytestmark = pytest.mark.django_db


def refused(path, user, **kw) -> str:
    with pytest.raises(Refused) as info:
        with HistoryImport(path, user=user, profile_key="mia", **kw) as imp:
            apply(imp)
    assert Message.objects.count() == 0 and Slice.objects.count() == 0 and Experience.objects.count() == 0
    assert not Profile.objects.filter(key="mia").exists()
    return str(info.value)


def test_truncated_json(tmp_path, user):
    data = json.dumps([s.chatgpt_conversation(cid="a"), s.chatgpt_conversation(cid="b")])
    path = tmp_path / "conversations.json"
    path.write_text(data[: len(data) - 300], encoding="utf-8")
    msg = refused(path, user)
    assert msg.startswith("conversations.json[1]: ") and "invalid or cut short" in msg


def test_invalid_utf8(tmp_path, user):
    data = json.dumps([s.chatgpt_conversation()], ensure_ascii=False).encode()
    bad = data.replace("杭州".encode(), b"\xff\xfe", 1)
    path = tmp_path / "c.json"
    path.write_bytes(bad)
    assert "not UTF-8" in refused(path, user)


def test_lone_surrogate(tmp_path, user):
    data = json.dumps([s.chatgpt_conversation()]).replace("Try the fish.", "\\ud800 fish")
    path = tmp_path / "c.json"
    path.write_text(data, encoding="utf-8")
    assert "surrogate" in refused(path, user)


def test_jsonl_with_one_broken_line(tmp_path, user):
    path = tmp_path / "chat.jsonl"
    text = "\n".join(json.dumps(x) for x in s.sillytavern_lines()).splitlines()
    text[3] = text[3][:40]
    path.write_text("\n".join(text), encoding="utf-8")
    msg = refused(path, user)
    assert msg.startswith("chat.jsonl line 4: the line is not JSON")


def test_zip_member_with_dot_dot(tmp_path, user):
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()], extra_members={"../../etc/x.png": b"x"})
    msg = refused(path, user)
    assert msg.startswith("e.zip, '../../etc/x.png': a member has an unsafe path")


def test_zip_member_with_absolute_path(tmp_path, user):
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()], extra_members={"/tmp/x.png": b"x"})
    assert "unsafe path" in refused(path, user)


def test_zip_expanding_past_the_import_limit(tmp_path, user, settings):
    settings.PREVIOUSLY_MAX_IMPORT_BYTES = 200_000
    path = s.chatgpt_zip(tmp_path / "bomb.zip", [s.chatgpt_conversation()], extra_members={"pad.bin": b"\0" * 300_000})
    assert path.stat().st_size < 200_000  # small on disk, large once expanded
    msg = refused(path, user)
    assert msg.startswith("bomb.zip, 'pad.bin': the zip archive expands past 200,000 bytes (PREVIOUSLY_MAX_IMPORT_BYTES)")


def test_zip_with_too_many_members(tmp_path, user, settings):
    settings.PREVIOUSLY_IMPORT_MAX_MEMBERS = 10
    path = s.chatgpt_zip(tmp_path / "many.zip", [s.chatgpt_conversation()],
                         extra_members={f"f{i}.txt": b"" for i in range(12)})
    assert "PREVIOUSLY_IMPORT_MAX_MEMBERS" in refused(path, user)


def test_plain_file_over_the_import_limit(tmp_path, user, settings):
    settings.PREVIOUSLY_MAX_IMPORT_BYTES = 1000
    path = tmp_path / "c.json"
    path.write_text(json.dumps([s.chatgpt_conversation()]), encoding="utf-8")
    assert "PREVIOUSLY_MAX_IMPORT_BYTES" in refused(path, user)


def test_chatgpt_parents_loop(tmp_path, user):
    good = s.chatgpt_conversation(cid="fine")
    conv = s.chatgpt_conversation(cid="loopy")
    conv["mapping"]["root"]["parent"] = "a3"
    path = s.chatgpt_zip(tmp_path / "e.zip", [good, conv])
    msg = refused(path, user)
    assert msg.startswith("e.zip:conversations.json[1] (loopy): the parents form a loop")


def test_openwebui_parent_missing(tmp_path, user):
    chats = s.openwebui_chats()
    chats[0]["chat"]["history"]["messages"]["u2"]["parentId"] = "nowhere"
    path = tmp_path / "owui.json"
    path.write_text(json.dumps(chats), encoding="utf-8")
    assert "names a parent 'nowhere' that is not in the tree" in refused(path, user)


def test_one_string_over_the_per_message_limit(tmp_path, user, settings):
    settings.PREVIOUSLY_MAX_MESSAGE_CHARS = 1000
    conv = s.chatgpt_conversation()
    conv["mapping"]["a1"]["message"]["content"]["parts"] = ["x" * 1001]
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation(cid="ok"), conv])
    msg = refused(path, user)
    assert "e.zip:conversations.json[1], 'a1'" in msg
    assert "1001 characters long; the limit is 1000 (PREVIOUSLY_MAX_MESSAGE_CHARS)" in msg


def test_a_string_past_what_the_stream_lets_through_is_refused_not_a_crash(tmp_path, user, settings):
    """Issue 27 point 9, S4: a string longer than any text the import takes is refused before
    the parser builds it, naming the file and the record (it escaped as an internal error)."""
    settings.PREVIOUSLY_MAX_MESSAGE_CHARS = 1024
    settings.PREVIOUSLY_MAX_PERSONA_CHARS = settings.PREVIOUSLY_MAX_FIELD_CHARS = 256
    conv = s.chatgpt_conversation()
    conv["mapping"]["a1"]["message"]["content"]["parts"] = ["x" * 1_500_000]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([s.chatgpt_conversation(cid="ok"), conv]), encoding="utf-8")
    msg = refused(path, user)
    assert msg.startswith("conversations.json[1]: a string runs past 1,060,864 bytes, longer than any the import takes")
    assert "a message may have 1,024 characters, PREVIOUSLY_MAX_MESSAGE_CHARS" in msg


def test_an_open_webui_data_url_past_twice_the_image_limit_is_refused(tmp_path, user, settings):
    """Issue 27 point 2 and 9, S4: Open WebUI's stream lets a data: URL of twice
    PREVIOUSLY_IMAGE_MAX_BYTES through (one over the limit is an image missing, counted); a
    longer string refuses the file, naming it, the record and both limits."""
    settings.PREVIOUSLY_MAX_MESSAGE_CHARS = 1024
    settings.PREVIOUSLY_MAX_PERSONA_CHARS = settings.PREVIOUSLY_MAX_FIELD_CHARS = 256
    settings.PREVIOUSLY_IMAGE_MAX_BYTES = 1_000_000
    chats = s.openwebui_chats()
    chats[0]["chat"]["history"]["messages"]["u2"]["files"] = [
        {"type": "image", "url": "data:image/png;base64," + "A" * 3_000_000}]
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps(chats), encoding="utf-8")
    msg = refused(path, user)
    assert msg.startswith("chat-export.json[0]: a string runs past 2,667,184 bytes")
    assert "an image 1,000,000 bytes, PREVIOUSLY_IMAGE_MAX_BYTES" in msg


def test_a_zip_of_something_else(tmp_path, user):
    path = tmp_path / "photos.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a.png", s.png())
    assert "not a ChatGPT, Claude, Open WebUI or SillyTavern export" in refused(path, user)


def test_a_damaged_zip(tmp_path, user):
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()])
    data = bytearray(path.read_bytes())
    data[60:90] = b"\0" * 30  # inside the first member's compressed bytes
    path.write_bytes(bytes(data))
    msg = refused(path, user)
    assert msg.startswith("e.zip")


def test_a_refusal_in_the_last_conversation_writes_nothing_of_the_first(tmp_path, user):
    bad = s.chatgpt_conversation(cid="bad")
    bad["mapping"] = "not a mapping"
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation(cid=f"c{i}") for i in range(5)] + [bad])
    assert "conversations.json[5]" in refused(path, user)
