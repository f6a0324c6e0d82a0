"""Stop a streaming reply (SPEC U2) and the socket guardrails (S3): frame size and rate, one
turn per profile across tabs. Real local model server, real SDK, Channels' communicator."""

import asyncio
import json
import re
import time
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from memory.models import Message, Profile
from previously.chat import consumers, guard, turn
from tests.llm_server import Turn
from tests.previously.chat.conftest import FINAL, new_mid

pytestmark = pytest.mark.django_db(transaction=True)

SLOW = Turn(chunks=[f"word{i} " for i in range(40)], chunk_delay=0.15)


@database_sync_to_async
def rows(profile):
    return list(Message.objects.for_profile(profile).order_by("created_at", "id").values_list("speaker", "content", "status"))


@database_sync_to_async
def lease(profile):
    return Profile.objects.get(pk=profile.pk).turn_until


async def first_token(chat) -> list[str]:
    frames = []
    while True:
        frames.append(await chat.ws.receive_from(timeout=10))
        if frames[-1].startswith('<span id="reply-'):
            return frames


async def test_stop_ends_the_model_call_and_archives_the_partial_reply_as_stopped(connect, user, profile, llm_server, llm_provider):
    llm_server.script(SLOW)
    chat = await connect(user)
    await chat.send("tell me a long story 📖", mid=new_mid(1))
    frames = await first_token(chat)
    start = 'id="stop-' in "".join(frames)
    assert start, "the streaming reply offers a stop button"
    asked = time.monotonic()
    await chat.ws.send_to(text_data=json.dumps({"action": "stop"}))
    rest = await chat.frames_until_reply()
    elapsed = time.monotonic() - asked
    print(f"stop → final frame: {elapsed * 1000:.0f} ms")  # reported, not asserted (numbers go in the report)
    final = rest[-1]
    assert 'class="msg assistant stopped' in final and "stopped" in re.sub(r"<[^>]+>", "", final)
    stored = await rows(profile)
    assert stored[0] == ("user", "tell me a long story 📖", "complete")
    speaker, content, status = stored[1]
    assert (speaker, status) == ("assistant", "stopped")
    assert content.startswith("word0") and 0 < len(content.split()) < 40  # a partial, as far as it went
    shown = "".join(re.sub(r"<[^>]+>", "", f) for f in frames + rest if f.startswith('<span id="reply-'))
    assert shown.strip() == content.strip()  # what the page showed is what the archive holds
    await asyncio.sleep(0.5)
    assert llm_server.closed_streams == 1  # the HTTP stream to the model was hung up on
    assert await lease(profile) is None  # the turn is over; the next one may start


async def test_a_stop_from_another_tab_stops_the_reply_and_a_second_turn_is_refused_meanwhile(connect, user, profile, llm_server, llm_provider):
    llm_server.script(SLOW, Turn(chunks=["again ", "here"]))
    first = await connect(user)
    second = await connect(user)
    await first.send("first tab", mid=new_mid(1))
    await first_token(first)
    await second.send("second tab 你好", mid=new_mid(2))
    refused = await second.ws.receive_from(timeout=5)
    assert 'id="msg-c_0000000000000002" hx-swap-oob="delete"' in refused  # the pending line goes
    assert 'data-text="second tab 你好"' in refused  # and its text back into the composer
    assert "still answering" in refused
    await second.ws.send_to(text_data=json.dumps({"action": "stop"}))
    final = (await first.frames_until_reply())[-1]
    assert "stopped" in final
    assert [r[0] for r in await rows(profile)] == ["user", "assistant"]  # the refused line was not archived
    # After the stop the profile takes a turn again, from either tab.
    frames = await second.say("second tab 你好", mid=new_mid(2))
    assert "again here" in frames[-1]


async def test_lines_sent_during_a_reply_wait_and_are_answered_in_order(connect, user, profile, llm_server, llm_provider, monkeypatch):
    """Issue 25 point 1 (S3): lines typed while this tab's reply streams are not refused: they
    wait and are answered one after another, in the order they were sent; past
    MAX_WAITING_LINES one is refused with its text given back. Nothing is dropped."""
    monkeypatch.setattr(consumers, "MAX_WAITING_LINES", 4)
    llm_server.script(SLOW, *[Turn(chunks=[f"answer {n}"]) for n in range(2, 6)])
    chat = await connect(user)
    await chat.send("one", mid=new_mid(1))
    await first_token(chat)
    for n in range(2, 7):
        await chat.send(f"more {n}", mid=new_mid(n))
    refused = await chat.ws.receive_from(timeout=5)
    assert "still answering" in refused and 'data-text="more 6"' in refused  # the fifth waiting line
    await chat.ws.send_to(text_data=json.dumps({"action": "stop"}))
    frames = []
    for _ in range(5):
        frames += await chat.frames_until_reply(timeout=15)
    assert not any("still answering" in f for f in frames)
    stored = await rows(profile)
    assert [r[1] for r in stored if r[0] == "user"] == ["one", "more 2", "more 3", "more 4", "more 5"]
    assert [r[0] for r in stored] == ["user", "assistant"] * 5
    assert [r[1] for r in stored[3::2]] == ["answer 2", "answer 3", "answer 4", "answer 5"]
    assert await lease(profile) is None


async def test_a_line_sent_as_the_reply_text_completes_is_answered_not_refused(connect, user, profile, llm_server, llm_provider, monkeypatch):
    """Issue 25 point 1: the reply's text is all on the screen while it is still being saved
    (here slowly); the person's next line, sent at that moment, gets its own reply."""
    saving = turn.store_reply

    def slow_store(*args, **kwargs):
        time.sleep(0.5)  # the reply being finished off: archived, indexed, embedded
        return saving(*args, **kwargs)

    monkeypatch.setattr(turn, "store_reply", slow_store)
    llm_server.script(Turn(chunks=["the whole ", "reply"]), Turn(chunks=["and the next"]))
    chat = await connect(user)
    await chat.send("first", mid=new_mid(1))
    shown = ""
    while "reply" not in shown:  # the last token of the reply is on the screen
        frame = await chat.ws.receive_from(timeout=10)
        if frame.startswith('<span id="reply-'):
            shown += re.sub(r"<[^>]+>", "", frame)
    await chat.send("second, at once", mid=new_mid(2))
    frames = await chat.frames_until_reply()  # the first reply's final frame
    frames += await chat.frames_until_reply()
    assert not any("still answering" in f for f in frames)
    assert "and the next" in frames[-1]
    assert [r[1] for r in await rows(profile)] == ["first", "the whole reply", "second, at once", "and the next"]


async def test_the_reply_is_saved_and_the_lease_let_go_in_one_write_s3_s4(connect, user, profile, llm_server, llm_provider,
                                                                           monkeypatch):
    """BENCH §5: while another person's import holds SQLite's write lock in batches, each write
    transaction of a turn waits for one. The reply, its link to the user line and the end of the
    lease are one transaction: the consumer makes no release write of its own after it."""
    releases = []

    async def counted(profile):
        releases.append(profile.pk)
        await database_sync_to_async(guard.release_turn)(profile)

    monkeypatch.setattr(consumers, "release_turn", counted)
    llm_server.script(Turn(chunks=["saved ", "at once"]))
    chat = await connect(user)
    await chat.send("one write please", mid=new_mid(1))
    await chat.frames_until_reply()
    assert await lease(profile) is None and releases == []
    user_line, reply = await database_sync_to_async(
        lambda: list(Message.objects.for_profile(profile).order_by("created_at", "id")))()
    assert reply.reply_of_id == user_line.pk and reply.prompt_trace


def test_the_reply_and_the_end_of_the_lease_commit_or_roll_back_together_s3(profile, monkeypatch):
    """One transaction: when the write fails as the lease is let go, the reply is not kept
    either and the lease stays held (the consumer's own release, after the turn, ends it)."""
    assert guard.take_turn(profile)
    said = turn.archive_message(profile=profile, mid=new_mid(1), speaker="user", content="hello 🙂").message
    release = guard.release_turn

    def released_then_failed(profile):
        release(profile)
        raise RuntimeError("disk full")

    monkeypatch.setattr(guard, "release_turn", released_then_failed)
    with pytest.raises(RuntimeError):
        turn.store_reply(profile, said, mid="a_1800000000000_abc1", raw="hi", content="hi", favs=[], status="complete",
                         end_turn=True)
    assert Profile.objects.get(pk=profile.pk).turn_until is not None
    assert not Message.objects.filter(mid="a_1800000000000_abc1").exists()
    monkeypatch.undo()
    turn.store_reply(profile, said, mid="a_1800000000000_abc1", raw="hi", content="hi", favs=[], status="complete",
                     end_turn=True)
    assert Profile.objects.get(pk=profile.pk).turn_until is None
    assert Message.objects.get(mid="a_1800000000000_abc1").reply_of_id == said.pk


async def test_a_crashed_process_lease_runs_out(profile):
    await database_sync_to_async(Profile.objects.filter(pk=profile.pk).update)(turn_until=timezone.now() + timedelta(minutes=1))
    assert not await database_sync_to_async(guard.take_turn)(profile)
    await database_sync_to_async(Profile.objects.filter(pk=profile.pk).update)(turn_until=timezone.now() - timedelta(seconds=1))
    assert await database_sync_to_async(guard.take_turn)(profile)


async def test_a_running_turn_renews_its_lease_so_a_short_lease_only_bounds_a_crash(
        connect, user, profile, llm_server, llm_provider, monkeypatch):
    """S3: the lease is short (a crashed process blocks the profile at most TURN_LEASE) because a
    live turn keeps renewing it; a reply longer than the lease still holds the profile."""
    monkeypatch.setattr(guard, "TURN_LEASE", timedelta(seconds=1))
    monkeypatch.setattr(guard, "TURN_RENEW_SECONDS", 0.2)
    llm_server.script(SLOW)  # 40 chunks × 0.15 s ≈ 6 s, far past the 1 s lease
    first = await connect(user)
    second = await connect(user)
    await first.send("a long one", mid=new_mid(1))
    await first_token(first)
    await asyncio.sleep(2.5)
    assert await lease(profile) > timezone.now()  # renewed, not run out
    await second.send("meanwhile", mid=new_mid(2))
    assert "still answering" in await second.ws.receive_from(timeout=5)
    await first.frames_until_reply()
    assert await lease(profile) is None


def test_the_real_lease_bounds_a_crash_to_a_minute():
    assert guard.TURN_LEASE <= timedelta(minutes=1)
    assert guard.TURN_RENEW_SECONDS * 2 < guard.TURN_LEASE.total_seconds()


async def test_a_frame_over_the_size_limit_is_refused_with_a_notice(connect, user, profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_WS_MAX_FRAME_BYTES = 4096
    chat = await connect(user)
    await chat.send("长" * 2000, mid=new_mid(1))  # 6000 bytes of UTF-8, 2000 characters
    frame = await chat.ws.receive_from(timeout=5)
    assert "Frame refused" in frame and "4096" in frame
    assert await rows(profile) == []
    assert llm_server.requests == []
    frames = await chat.say("short one", mid=new_mid(2))  # the socket still works
    assert FINAL in frames[-1]


async def test_frames_over_the_rate_are_dropped_with_one_notice(connect, user, profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_WS_RATE_FRAMES = 5
    settings.PREVIOUSLY_WS_RATE_SECONDS = 60
    chat = await connect(user)
    for _ in range(30):
        await chat.ws.send_to(text_data=json.dumps({"action": "nonsense"}))
    answers = []
    while not await chat.ws.receive_nothing(timeout=0.5):
        answers.append(await chat.ws.receive_from())
    assert sum("Unknown action" in a for a in answers) == 5  # the first five were handled
    assert sum("Too many frames" in a for a in answers) == 1  # one notice for the flood
    await chat.send("now?", mid=new_mid(1))
    assert await chat.ws.receive_nothing(timeout=0.5)  # still over the rate: dropped, not queued
    assert await rows(profile) == []


async def test_the_notices_speak_the_profile_language(connect, user, llm_server, llm_provider, settings):
    from tests.factories import ProfileFactory

    await database_sync_to_async(ProfileFactory)(user=user, key="owner", language="zh")
    settings.PREVIOUSLY_WS_MAX_FRAME_BYTES = 1024
    chat = await connect(user)
    await chat.send("x" * 2000, mid=new_mid(1))
    frame = await chat.ws.receive_from(timeout=5)
    assert "2" in frame and "1024" in frame and "Frame refused" not in frame


async def test_the_turn_is_free_when_the_reply_is_shown_not_after_the_housekeeping(connect, user, profile, llm_server, llm_provider):
    """The lease goes before the final frame: a line sent the moment the reply shows (from any
    tab) is answered, even while the after-reply work (K10) still runs."""
    llm_server.script(Turn(chunks=["one"]), Turn(chunks=["two"]))
    chat = await connect(user)
    await chat.say("first", mid=new_mid(1))
    assert await lease(profile) is None
    other = await connect(user)
    frames = await other.say("second at once", mid=new_mid(2))
    assert "two" in frames[-1] and not any("still answering" in f for f in frames)
