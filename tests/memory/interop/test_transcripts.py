"""Leaving (SPEC H4, issue 27 point 8): conversations as Markdown and as a SillyTavern chat, read back.

The .jsonl is checked against what SillyTavern's own import takes (src/endpoints/chats.js,
`/import` with format "jsonl": the first line parsed as JSON must have `user_name`; each line is
one JSON object joined by "\\n") and what its chat messages hold (`name`, `is_user`,
`is_system`, `send_date`, `mes`, `extra`; `swipes`, `swipe_id`, `swipe_info` together)."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from memory.archive import archive_message
from memory.deletion import hide_message
from memory.interop.history import HistoryImport, apply
from memory.interop.transcripts import markdown, sillytavern_jsonl
from memory.models import Message, Profile, Slice

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 30, 12, 0, 5, 250000, tzinfo=UTC)  # 20:00:05 in Shanghai


@pytest.fixture
def aria(user):
    return Profile.objects.create(user=user, key="aria", name="Aria", language="en", tz="Asia/Shanghai")


def line(profile, n, speaker, text, at, **kw):
    mid = f"c_{n:016x}" if speaker == "user" else f"a_{1764500000000 + n}_x{n:03d}"
    return archive_message(profile=profile, mid=mid, speaker=speaker, content=text, created_at=at, tz="Asia/Shanghai", **kw).message


def conversation(profile):
    """Two conversations; in the first, a regenerated reply (three alternatives, the second chosen)."""
    q = line(profile, 1, "user", "Do you remember *my* cat?", T0)
    replies = [line(profile, 2 + i, "assistant", text, T0 + timedelta(seconds=10 + i))
               for i, text in enumerate(["Mochi!", "Of course — Mochi, the grey one.", "Yes."])]
    Message.objects.filter(pk__in=[r.pk for r in replies]).update(reply_of=q)
    hide_message(replies[0])
    hide_message(replies[2])
    gone = line(profile, 9, "user", "a line I hid", T0 + timedelta(seconds=30))
    hide_message(gone)
    line(profile, 10, "assistant", "Offline — no model configured", T0 + timedelta(seconds=40), message_type=Message.Type.SYSTEM)
    line(profile, 11, "user", "晚安！\nSee you tomorrow", T0 + timedelta(days=1))
    return q, replies


def test_markdown_names_the_speakers_and_gives_local_times(aria):
    conversation(aria)

    text = "".join(markdown(aria, person="Mei"))

    assert text.startswith("# Aria and Mei: every conversation\n")
    assert "Times are in Asia/Shanghai." in text
    assert "## Conversation of 2026-11-30 20:00" in text and "## Conversation of 2026-12-01 20:00" in text
    assert "**Mei** · 2026-11-30 20:00:05\n\nDo you remember *my* cat?\n" in text
    assert "**Aria** · 2026-11-30 20:00:16\n\nOf course — Mochi, the grey one.\n" in text
    assert "_Other replies to this line (not chosen):_\n\n> Mochi!\n\n> Yes.\n" in text
    assert "**Mei** · 2026-12-01 20:00:05\n\n晚安！\nSee you tomorrow\n" in text
    assert "a line I hid" not in text and "Offline — no model configured" not in text


def test_markdown_of_one_conversation(aria):
    conversation(aria)
    first = Slice.objects.for_profile(aria).order_by("started_at").first()

    text = "".join(markdown(aria, person="Mei", slice_=first))

    assert text.startswith("# Aria and Mei: the conversation of 2026-11-30 20:00\n")
    assert "晚安" not in text


def test_the_sillytavern_chat_is_a_header_then_one_message_a_line(aria):
    q, replies = conversation(aria)

    text = "".join(sillytavern_jsonl(aria, person="Mei"))

    rows = [json.loads(row) for row in text.split("\n")]  # as SillyTavern's import splits it
    header, messages = rows[0], rows[1:]
    assert header == {"user_name": "Mei", "character_name": "Aria", "create_date": "2026-11-30 @20h 00m 05s 250ms",
                      "chat_metadata": {}}
    assert [(m["name"], m["is_user"], m["is_system"], m["mes"]) for m in messages] == [
        ("Mei", True, False, "Do you remember *my* cat?"),
        ("Aria", False, False, "Of course — Mochi, the grey one."),
        ("Mei", True, False, "晚安！\nSee you tomorrow"),
    ]
    assert messages[0]["send_date"] == "2026-11-30T12:00:05.250Z"  # as JavaScript's toISOString()
    assert all(datetime.fromisoformat(m["send_date"]) for m in messages)
    chosen = messages[1]
    assert chosen["swipes"] == ["Mochi!", "Of course — Mochi, the grey one.", "Yes."]
    assert chosen["swipe_id"] == 1 and chosen["swipes"][chosen["swipe_id"]] == chosen["mes"]
    assert len(chosen["swipe_info"]) == 3 and all(set(i) == {"send_date", "extra"} for i in chosen["swipe_info"])
    assert "swipes" not in messages[0] and all(m["extra"] == {} for m in messages)


def test_the_sillytavern_chat_of_one_conversation_has_only_its_lines(aria):
    conversation(aria)
    last = Slice.objects.for_profile(aria).order_by("started_at").last()

    rows = "".join(sillytavern_jsonl(aria, person="Mei", slice_=last)).split("\n")

    assert len(rows) == 2 and json.loads(rows[1])["mes"] == "晚安！\nSee you tomorrow"
    assert json.loads(rows[0])["create_date"] == "2026-12-1 @20h 00m 05s 250ms"


def test_the_sillytavern_chat_reads_back_through_our_own_sillytavern_import(aria, user, tmp_path):
    q, replies = conversation(aria)
    path = tmp_path / "Aria - export.jsonl"
    path.write_text("".join(sillytavern_jsonl(aria, person="Mei")), encoding="utf-8")

    with HistoryImport(path, user=user, profile_key="back") as imp:
        report = apply(imp)

    assert report.app == "sillytavern" and report.total().lines == 3 and report.total().alternatives == 2
    back = Profile.objects.get(user=user, key="back")
    shown = list(Message.objects.filter(profile=back, deleted_at__isnull=True).order_by("created_at", "id"))
    assert [(m.speaker, m.content, m.created_at) for m in shown] == [
        ("user", "Do you remember *my* cat?", T0.replace(microsecond=0)),
        ("assistant", "Of course — Mochi, the grey one.", replies[1].created_at.replace(microsecond=0)),
        ("user", "晚安！\nSee you tomorrow", (T0 + timedelta(days=1)).replace(microsecond=0)),
    ]
    # The unchosen swipes come back as that reply's hidden alternatives, each with its own time.
    swipes = Message.objects.filter(profile=back, reply_of=shown[0]).order_by("created_at", "id")
    assert [(m.content, m.deleted_at is not None, m.created_at) for m in swipes] == [
        ("Mochi!", True, replies[0].created_at.replace(microsecond=0)),
        ("Of course — Mochi, the grey one.", False, replies[1].created_at.replace(microsecond=0)),
        ("Yes.", True, replies[2].created_at.replace(microsecond=0)),
    ]
