"""The chat turn over the websocket (SPEC A2, A3, A5, C2, L2, L3), against a real local
OpenAI-compatible server through the real SDK."""

import asyncio
import re
from datetime import datetime

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import DatabaseError, connections

from memory.archive import archive_message
from memory.models import Highlight, Message
from previously.chat import turn
from previously.llm import gate, reset_provider
from previously.llm.offline import Offline
from previously.push import profile_group
from previously.routing import websocket_urlpatterns
from tests.factories import ProfileFactory, UserFactory
from tests.llm_server import Turn
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def offline():
    """No model configured (L2) for the test's turns."""
    reset_provider(Offline())
    yield
    reset_provider(None)


@database_sync_to_async
def remember(profile, text, at):
    """An old line, written through the archive (so it is indexed)."""
    return archive_message(profile=profile, mid=new_mid(99), speaker="user", content=text, created_at=datetime.fromisoformat(at))


@database_sync_to_async
def rows(profile):
    return list(Message.objects.for_profile(profile).order_by("created_at", "id").values_list("mid", "speaker", "content", "status", "message_type"))


async def test_a_reply_streams_token_by_token_and_both_lines_are_archived(connect, user, profile, llm_server, llm_provider):
    # A model slower than the page's frame pace: each chunk is a frame of its own.
    llm_server.script(Turn(chunks=["Hel", "lo ", "Alice", "!"], chunk_delay=turn.TOKEN_FRAME_SECONDS * 1.6))
    chat = await connect(user)
    frames = await chat.say("hi there", mid=new_mid(1))
    assert 'id="msg-c_0000000000000001"' in frames[0] and "hi there" in frames[0]
    tokens = [f for f in frames if f.startswith("<span id=\"reply-")]
    assert [re.sub(r"<[^>]+>", "", t) for t in tokens] == ["Hel", "lo ", "Alice", "!"]
    assert "Hello Alice!" in frames[-1]
    stored = await rows(profile)
    assert [(r[1], r[2], r[3]) for r in stored] == [("user", "hi there", "complete"), ("assistant", "Hello Alice!", "complete")]
    assert re.fullmatch(r"a_\d{13}_[0-9a-f]{8}", stored[1][0])


async def test_a_fast_model_s_tokens_are_gathered_into_fewer_frames_the_first_at_once(connect, user, profile,
                                                                                        llm_server, llm_provider):
    """Issue 24 point 11 (BENCH §4): a model streams a chunk per token; the page gets the first
    words as they come and the rest at most every TOKEN_FRAME_SECONDS, not a frame (a render
    and a websocket send) per token."""
    words = [f"w{i} " for i in range(60)] + ["讲完了 🎉"]
    llm_server.script(Turn(chunks=words))
    chat = await connect(user)
    frames = await chat.say("tell me a long story", mid=new_mid(1))
    tokens = [re.sub(r"<[^>]+>", "", f) for f in frames if f.startswith("<span id=\"reply-")]
    assert tokens[0] == "w0 "
    assert "".join(tokens) == "".join(words)
    assert len(tokens) < 10, tokens
    assert (await rows(profile))[1][2] == "".join(words).strip()


async def test_words_held_for_the_next_frame_go_out_when_the_model_pauses(connect, user, profile, llm_server,
                                                                          llm_provider):
    """A word gathered after a frame is sent once its frame is due, even if the model says
    nothing more for a while (a pause mid-reply), not only with the model's next chunk."""
    llm_server.script(Turn(chunks=["One ", "two ", "three"], pauses={2: 0.6}))
    chat = await connect(user)
    frames = await chat.say("count", mid=new_mid(1))
    tokens = [re.sub(r"<[^>]+>", "", f) for f in frames if f.startswith("<span id=\"reply-")]
    assert tokens == ["One ", "two ", "three"]


async def test_the_companion_s_model_is_looked_up_off_the_event_loop(connect, user, profile, llm_server, llm_provider,
                                                                     monkeypatch):
    """`provider_for` may read the stored model choice (O4); it runs in the turn's database
    hop with the recall, never on the event loop, where its read would block every socket."""
    looked_up_on_a_loop = []
    real = turn.provider_for

    def spy(p):
        try:
            asyncio.get_running_loop()
            looked_up_on_a_loop.append(True)
        except RuntimeError:
            looked_up_on_a_loop.append(False)
        return real(p)

    monkeypatch.setattr(turn, "provider_for", spy)
    llm_server.script(Turn(chunks=["ok"]))
    chat = await connect(user)
    await chat.say("which model answers?", mid=new_mid(1))
    assert looked_up_on_a_loop == [False]


async def test_model_output_is_escaped_in_the_page(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["<script>alert(1)</script>", " & done"]))
    chat = await connect(user)
    frames = await chat.say("<img src=x onerror=alert(2)>", mid=new_mid(1))
    page = "".join(frames)
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x" in page


async def test_anonymous_users_are_rejected(profile):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/chat/owner/")
    communicator.scope["user"] = AnonymousUser()
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


async def test_a_profile_of_another_user_is_rejected_p2(connect, profile):
    mallory = await database_sync_to_async(UserFactory)()
    assert await connect(mallory, "owner") == 4403


async def test_the_full_asgi_stack_rejects_a_socket_without_a_session(profile):
    from previously.asgi import application

    communicator = WebsocketCommunicator(application, "/ws/chat/owner/", headers=[(b"origin", b"http://127.0.0.1")])
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


async def test_a_resent_mid_after_a_reconnect_neither_duplicates_nor_fails_a2(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["first ", "answer"]))
    chat = await connect(user)
    await chat.say("same words", mid=new_mid(7))
    again = await connect(user)  # the page reconnected and its queue resends the frame
    await again.send("same words", mid=new_mid(7))
    frames = [await again.ws.receive_from(), await again.ws.receive_from()]
    assert "same words" in frames[0] and "first answer" in frames[1]
    assert await again.ws.receive_nothing()
    assert len(llm_server.requests) == 1
    assert [(r[1], r[2]) for r in await rows(profile)] == [("user", "same words"), ("assistant", "first answer")]


async def test_a_mid_conflict_gets_a_clear_error_and_changes_nothing_a2(connect, user, profile, llm_server, llm_provider):
    chat = await connect(user)
    await chat.say("original", mid=new_mid(3))
    await chat.send("different text", mid=new_mid(3))
    frames = [await chat.ws.receive_from(), ]
    assert "mid_conflict" in frames[0] and 'hx-swap-oob="delete"' in frames[0]
    assert await chat.ws.receive_nothing()
    assert [r[2] for r in await rows(profile)][0] == "original"
    assert len(await rows(profile)) == 2


async def test_an_invalid_mid_is_refused_with_a_notice(connect, user, profile, llm_provider):
    chat = await connect(user)
    await chat.send("hello", mid="not-a-mid")
    assert "invalid message id" in await chat.ws.receive_from()
    assert await rows(profile) == []


async def test_model_down_keeps_the_user_message_shows_the_error_and_retry_works_l3(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(status=500), Turn(chunks=["back ", "again"]))
    chat = await connect(user)
    frames = await chat.say("are you there?", mid=new_mid(1))
    final = frames[-1]
    assert "reply failed" in final and "The model server failed (500). Your message is saved; try again." in final
    assert 'name="action" value="retry"' in final and f'value="{new_mid(1)}"' in final
    stored = await rows(profile)
    assert [(r[1], r[2], r[3]) for r in stored] == [("user", "are you there?", "complete"), ("assistant", "", "failed")]

    await chat.ws.send_json_to({"action": "retry", "mid": new_mid(1), "failed": stored[1][0]})
    retried = await chat.frames_until_reply()
    assert 'hx-swap-oob="delete"' in retried[0]  # the used retry button goes away
    assert "back again" in retried[-1]
    assert [(r[1], r[2], r[3]) for r in await rows(profile)][-1] == ("assistant", "back again", "complete")


async def test_a_model_dying_mid_stream_archives_the_partial_as_failed_and_retry_works_l3(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["I was ", "saying ", "that"], die_after=2), Turn(chunks=["Full reply."]))
    chat = await connect(user)
    frames = await chat.say("tell me", mid=new_mid(1))
    assert "I was saying" in frames[-1] and "reply failed" in frames[-1]
    stored = await rows(profile)
    assert (stored[1][1], stored[1][2], stored[1][3]) == ("assistant", "I was saying", "failed")
    await chat.ws.send_json_to({"action": "retry", "mid": new_mid(1)})
    assert "Full reply." in (await chat.frames_until_reply())[-1]
    assert [r[3] for r in await rows(profile)] == ["complete", "failed", "complete"]


async def test_when_the_reply_cannot_be_archived_it_is_still_delivered_with_a_notice_a3(connect, user, profile, llm_server, llm_provider, monkeypatch):
    real = turn.archive_message

    def failing(**kwargs):
        if kwargs["speaker"] == "assistant":
            raise DatabaseError("disk full")
        return real(**kwargs)

    monkeypatch.setattr(turn, "archive_message", failing)
    llm_server.script(Turn(chunks=["still ", "here"]), Turn(chunks=["and again"]))
    chat = await connect(user)
    frames = await chat.say("hello", mid=new_mid(1))
    assert "still here" in frames[-1] and "Not saved to the archive" in frames[-1]
    monkeypatch.setattr(turn, "archive_message", real)
    frames = await chat.say("second", mid=new_mid(2))  # the chat goes on
    assert "and again" in frames[-1] and "Not saved" not in frames[-1]
    assert [(r[1], r[2]) for r in await rows(profile)] == [("user", "hello"), ("user", "second"), ("assistant", "and again")]


async def test_a_fav_marker_quoting_the_conversation_makes_a_highlight_and_is_never_shown_c2(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["That's lovely. [[fav:", "我的猫叫", "Mochi]]", " Tell me more."]))
    chat = await connect(user)
    frames = await chat.say("我的猫叫Mochi，她三岁了", mid=new_mid(1))
    assert not any("[[fav" in f or "fav:" in f for f in frames)
    assert "<p>That's lovely. Tell me more.</p>" in frames[-1]  # rendered as Markdown (U1)
    stored = await rows(profile)
    assert stored[1][2] == "That's lovely. Tell me more."
    highlight = await database_sync_to_async(Highlight.objects.get)(profile=profile)
    assert (highlight.content, highlight.mid, highlight.source) == ("我的猫叫Mochi", new_mid(1), "assistant")
    raw = await database_sync_to_async(lambda: Message.objects.get(mid=stored[1][0]).raw_content)()
    assert "[[fav:我的猫叫Mochi]]" in raw


async def test_a_fav_marker_not_quoting_the_conversation_is_ignored_c1(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["Noted. [[fav:words nobody said]]"]))
    chat = await connect(user)
    frames = await chat.say("just chatting", mid=new_mid(1))
    assert "words nobody said" not in "".join(frames)
    assert await database_sync_to_async(Highlight.objects.count)() == 0
    assert (await rows(profile))[1][2] == "Noted."


async def test_the_model_gets_recalled_memory_and_the_recent_turns(connect, user, profile, llm_server, llm_provider):
    await remember(profile, "My sister Lena lives in Porto", "2025-01-05T10:00+00:00")
    chat = await connect(user)
    await chat.say("hello", mid=new_mid(1))
    await chat.say("where does Lena live?", mid=new_mid(2))
    sent = llm_server.requests[-1]["messages"]
    assert sent[0]["role"] == "system" and "My sister Lena lives in Porto" in sent[0]["content"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]
    assert sent[-1]["content"] == "where does Lena live?"


async def test_offline_mode_answers_from_memory_labelled_not_a_model_and_archives_it_l2(connect, user, llm_server, offline):
    profile = await database_sync_to_async(ProfileFactory)(user=user, key="owner", language="en")
    await remember(profile, "My sister Lena lives in Porto", "2025-01-05T10:00+00:00")
    chat = await connect(user)
    frames = await chat.say("where does Lena live?", mid=new_mid(1))
    assert "Offline — no model configured. From your memory:" in frames[-1]
    assert "2025-01-05" in frames[-1] and "My sister Lena lives in Porto" in frames[-1]
    assert "not a model" in frames[-1]
    reply = (await rows(profile))[-1]
    assert (reply[1], reply[4]) == ("assistant", "system")
    assert llm_server.requests == []


@pytest.mark.parametrize("request_text", ["remember that my cat is called Miso 🐱", "记住：我的猫叫小米"])
async def test_offline_a_remember_request_records_a_skipped_run_with_its_reason_k10_k11(connect, user, request_text, offline):
    profile = await database_sync_to_async(ProfileFactory)(user=user, key="owner", language="en")
    chat = await connect(user)
    frames = await chat.say(request_text, mid=new_mid(1))
    skipped = await chat.ws.receive_from(timeout=5)
    assert "Offline" in frames[-1]
    assert "Card update skipped:" in skipped and "no model configured" in skipped
    runs = await database_sync_to_async(lambda: list(profile.evolution_runs.values_list("trigger", "status", "skip_reason")))()
    assert runs == [("explicit", "skipped", "no model configured")]


async def test_offline_an_ordinary_line_starts_no_run(connect, user, offline):
    profile = await database_sync_to_async(ProfileFactory)(user=user, key="owner", language="en")
    chat = await connect(user)
    await chat.say("just saying hi", mid=new_mid(1))
    await chat.ws.receive_nothing(timeout=0.3)
    assert not await database_sync_to_async(profile.evolution_runs.exists)()


async def test_offline_replies_speak_chinese_for_a_chinese_profile_l2(connect, user, offline):
    profile = await database_sync_to_async(ProfileFactory)(user=user, key="owner", language="zh")
    await remember(profile, "我下周三要交季度报告", "2025-01-05T10:00+00:00")
    chat = await connect(user)
    frames = await chat.say("季度报告是什么时候？", mid=new_mid(1))
    assert "离线模式——没有配置模型。以下是你的记忆：" in frames[-1] and "我下周三要交季度报告" in frames[-1]
    assert (await rows(profile))[-1][2].startswith("离线模式")


async def test_offline_replies_may_quote_the_current_conversation_l2(connect, user, offline):
    """Offline, nobody replays the recent turns, so a line said a minute ago is quotable."""
    await database_sync_to_async(ProfileFactory)(user=user, key="owner", language="en")
    chat = await connect(user)
    await chat.say("My cat Mochi 🐱 loves tuna", mid=new_mid(1))
    frames = await chat.say("What does Mochi love?", mid=new_mid(2))
    assert "My cat Mochi 🐱 loves tuna" in frames[-1]
    assert "What does Mochi love?" not in frames[-1].split("From your memory:")[1]


async def test_an_offline_turn_recalls_once_and_its_trace_names_what_it_quoted_l2_u4(connect, user, monkeypatch, offline):
    """The offline answer quotes what the turn's one recall found (it was two recalls a turn,
    the first one for a prompt no model reads); "why this reply" names the quoted lines."""
    profile = await database_sync_to_async(ProfileFactory)(user=user, key="owner", language="en")
    said = await remember(profile, "My sister Lena lives in Porto 🌊", "2025-01-05T10:00+00:00")
    calls, real = [], turn.recall
    monkeypatch.setattr(turn, "recall", lambda **kw: calls.append(kw["query"]) or real(**kw))
    chat = await connect(user)
    frames = await chat.say("where does Lena live?", mid=new_mid(1))
    assert "My sister Lena lives in Porto 🌊" in frames[-1]
    assert calls == ["where does Lena live?"]
    trace = await database_sync_to_async(
        lambda: Message.objects.get(profile=profile, speaker="assistant").prompt_trace)()
    assert trace["recalled"][0] == said.message.pk


async def test_page_events_of_the_profile_group_reach_the_page(connect, user, profile):
    chat = await connect(user)
    await get_channel_layer().group_send(profile_group(profile), {"type": "page.event", "html": '<div id="card-status" hx-swap-oob="true">evolving</div>'})
    assert "evolving" in await chat.ws.receive_from()


async def test_when_the_users_line_cannot_be_saved_the_reply_still_comes_and_saving_is_retried_a3(connect, user, profile, llm_server, llm_provider, monkeypatch):
    real = turn.archive_message
    failures = {"left": 1}

    def failing_once(**kwargs):
        if kwargs["speaker"] == "user" and failures["left"]:
            failures["left"] -= 1
            raise DatabaseError("database is locked")
        return real(**kwargs)

    monkeypatch.setattr(turn, "archive_message", failing_once)
    monkeypatch.setattr(turn, "SAVE_RETRY_SECONDS", [0.05, 0.05])
    llm_server.script(Turn(chunks=["我在，", "still here 🌱"]))
    chat = await connect(user)

    frames = await chat.say("你好 hello", mid=new_mid(1))

    assert "could not be saved yet" in frames[0] and "saving is retried" in frames[0]
    assert "still here 🌱" in frames[-1] and "Not saved yet" in frames[-1]
    saved = await chat.ws.receive_from(timeout=5)
    assert "saved now" in saved
    assert [(r[1], r[2]) for r in await rows(profile)] == [("user", "你好 hello"), ("assistant", "我在，still here 🌱")]


async def test_a_stored_reply_whose_alternatives_cannot_be_read_is_not_called_unsaved(connect, user, profile, llm_server, llm_provider, monkeypatch):
    """The reply's write and the read of its place among its line's replies (U2) share one
    database call (BENCH §4); the read failing after the write leaves the reply as it is: saved."""
    def failing(messages):
        raise DatabaseError("database is locked")

    monkeypatch.setattr(turn, "mark_alternatives", failing)
    llm_server.script(Turn(chunks=["好的 ", "ok 🌱"]))
    chat = await connect(user)

    frames = await chat.say("还在吗 still there?", mid=new_mid(2))

    assert "ok 🌱" in frames[-1] and "Not saved" not in frames[-1]
    assert [(r[1], r[2]) for r in await rows(profile)] == [("user", "还在吗 still there?"), ("assistant", "好的 ok 🌱")]


async def test_an_unsaved_line_that_never_saves_is_named_and_nothing_is_half_stored_a3(connect, user, profile, llm_server, llm_provider, monkeypatch):
    def failing(**kwargs):
        raise DatabaseError("disk full")

    monkeypatch.setattr(turn, "archive_message", failing)
    monkeypatch.setattr(turn, "SAVE_RETRY_SECONDS", [0.01, 0.01])
    llm_server.script(Turn(chunks=["replying anyway"]))
    chat = await connect(user)

    frames = await chat.say("hello", mid=new_mid(1))

    assert "replying anyway" in frames[-1]
    assert "still could not be saved" in await chat.ws.receive_from(timeout=5)
    assert await rows(profile) == []


async def test_a_typing_frame_sets_background_model_work_aside_and_answers_nothing(connect, user, profile, llm_server, llm_provider, monkeypatch):
    """Issue 26 point 2: the composer's keystrokes send {"action": "typing"}; background calls
    give way to the line that is coming (previously.llm.gate)."""
    monkeypatch.setattr(gate, "_typing_until", 0.0)  # and back after the test: no hold leaks into the next
    chat = await connect(user)
    assert not gate.person_waiting()
    await chat.ws.send_json_to({"action": "typing"})
    assert await chat.ws.receive_nothing(timeout=0.5)
    assert gate.person_waiting()
    assert llm_server.requests == []


def _file_waiting():
    connections["default"].ensure_connection()
    return getattr(connections["default"], "waiting", None)  # memory.sqlite's, on a file


async def test_an_import_sees_a_turn_under_way_until_its_reply_is_archived_s4(connect, user, profile, monkeypatch, offline):
    """BENCH §5: between two batches an import gives way to a turn from its line to its reply
    (memory.sqlite.waiting.WritesComing), not only while one of its writes waits for the lock."""
    if await database_sync_to_async(_file_waiting)() is None:
        pytest.skip("SQLite's one write lock, in a file other processes open")
    seen = []
    real = turn.store_reply

    def store_reply(*args, **kwargs):
        seen.append(connections["default"].waiting.someone_waits())
        return real(*args, **kwargs)

    monkeypatch.setattr(turn, "store_reply", store_reply)
    chat = await connect(user)
    await chat.say("还在吗? still there 🙂", mid=new_mid(1))
    assert seen == [True]
    assert not (await database_sync_to_async(_file_waiting)()).someone_waits()


async def test_while_the_model_streams_an_import_does_not_wait_for_the_turn_s4(connect, user, profile, llm_server,
                                                                            llm_provider, monkeypatch):
    """The model's seconds hold no write: the announcement pauses for them, so an import is not
    kept waiting at every part of its batches while a reply streams; the reply's write is
    announced again."""
    waiting = await database_sync_to_async(_file_waiting)()
    if waiting is None:
        pytest.skip("SQLite's one write lock, in a file other processes open")
    seen = {}
    real_stream, real_store = turn._stream, turn.store_reply

    async def stream(*args, **kwargs):
        seen["streaming"] = waiting.someone_waits()
        return await real_stream(*args, **kwargs)

    def store_reply(*args, **kwargs):
        seen["storing"] = connections["default"].waiting.someone_waits()
        return real_store(*args, **kwargs)

    monkeypatch.setattr(turn, "_stream", stream)
    monkeypatch.setattr(turn, "store_reply", store_reply)
    llm_server.script(Turn(chunks=["慢慢", "来 ", "slowly 🙂"]))
    chat = await connect(user)
    frames = await chat.say("tell me slowly", mid=new_mid(1))
    assert "慢慢来 slowly 🙂" in frames[-1]
    assert seen == {"streaming": False, "storing": True}
