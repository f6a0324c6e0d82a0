"""Off the record (SPEC P5, issue 28 point 5) over the real websocket consumer, against the
scripted OpenAI-compatible server: shown while it lasts, kept nowhere; the model still gets
the card and recall of the archived past, and this conversation's own lines as context."""

import json
import logging
import re
import secrets
from datetime import datetime

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from memory.archive import archive_message
from memory.models import EvolutionRun, Message, Slice
from previously.chat import markdown
from previously.llm import reset_provider
from previously.llm.offline import Offline
from tests.factories import CardFactory
from tests.llm_server import Turn
from tests.memory.test_forget_audit import dump_all_tables, file_leaks, forms, leaks
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)
CARD = "## Identity\n- Name: 安娜 card-7f3a"


async def frame(chat, action: str, **fields) -> None:
    await chat.ws.send_to(text_data=json.dumps({"action": action, **fields}))


async def off_say(chat, text: str, *, mid: str) -> list[str]:
    await chat.send(text, mid=mid, action="off_send")
    return await chat.frames_until_reply()


@database_sync_to_async
def _setup(profile):
    CardFactory(profile=profile, text=CARD)
    archive_message(profile=profile, mid=new_mid(90), speaker="user", content="My cat Miso loves the balcony",
                    created_at=datetime.fromisoformat("2026-03-01T10:00:00+00:00"))


@database_sync_to_async
def _counts(profile):
    return Message.objects.filter(profile=profile).count(), Slice.objects.filter(profile=profile).count()


@database_sync_to_async
def _audit(needles):
    found = leaks(dump_all_tables(), needles)
    if connection.vendor == "sqlite":
        found += [f"file:{n}" for n in file_leaks(needles)]
    return found


async def test_an_off_the_record_exchange_reaches_no_table_and_no_byte_of_the_database_p5(
        connect, user, profile, llm_server, llm_provider, caplog, settings):
    """P5: after a real exchange (two lines, a regenerate) nothing of it is in any table, nor in
    the SQLite file or its WAL, nor in any log line; the audit sees an archived line (it can fail)."""
    for name in (None, "previously", "memory"):  # the app's loggers have their own level
        caplog.set_level(logging.DEBUG, logger=name)
    settings.PREVIOUSLY_TURN_ANALYZER_MODEL = True  # the analyzer would run after an archived reply
    await _setup(profile)
    before = await _counts(profile)
    marker = secrets.token_hex(6)
    said = f"记住这个：紫藤{marker} 🌸 remember the violet code"
    answer = f"好的，紫藤{marker} 🌸 noted"
    llm_server.script(Turn(chunks=["好的，", f"紫藤{marker} 🌸", " noted"]),
                      Turn(chunks=["Again: ", f"紫藤{marker}", " 🌸"]),
                      Turn(chunks=["Regenerated ", f"紫藤{marker}"]))
    chat = await connect(user)
    await frame(chat, "off_start")
    started = await chat.ws.receive_from()
    assert 'id="off-record"' in started and "off-record on" in started and 'id="off-messages"' in started
    frames = await off_say(chat, said, mid=new_mid(1))
    page = "".join(frames)
    assert 'id="off-messages" hx-swap-oob="beforeend"' in page and answer in frames[-1] and "off-line" in frames[-1]
    frames = await off_say(chat, f"再说一遍 {marker} 😀", mid=new_mid(2))
    last = re.search(r'id="msg-(a_[0-9]+_[0-9a-f]{8})"', frames[-1]).group(1)
    await frame(chat, "off_regenerate", mid=last)
    frames = await chat.frames_until_reply()
    assert f'id="msg-{last}" hx-swap-oob="delete"' in frames[0] and "Regenerated" in frames[-1]
    await frame(chat, "off_end")
    assert "Nothing of it was kept" in await chat.ws.receive_from()
    assert await chat.ws.receive_nothing()
    assert len(llm_server.requests) == 3  # the replies only: no analyzer, no Previously Agent
    await chat.ws.disconnect()

    assert await _counts(profile) == before  # no line, no slice
    assert not await database_sync_to_async(EvolutionRun.objects.exists)()
    needles = forms(said) + forms(answer) + [marker, f"紫藤{marker}"]
    assert await _audit(needles) == []
    assert any(r.name.startswith("openai") for r in caplog.records)  # debug lines were captured
    assert marker not in caplog.text
    assert markdown._cache.get(markdown._key(answer)) is None  # not even the rendered HTML is cached

    # The audit can fail: the same words said on the record are found in the table dump and the file.
    llm_server.script(Turn(chunks=["ok"]))
    chat = await connect(user)
    await chat.say(said, mid=new_mid(3))
    assert await _audit(forms(said)) != []


async def test_the_model_gets_the_card_recall_and_the_conversation_so_far_p5(
        connect, user, profile, llm_server, llm_provider):
    """P5: the request holds the card and a recalled archived line (as usual), then this
    conversation's earlier off-the-record lines as turns before the new one."""
    await _setup(profile)
    llm_server.script(Turn(chunks=["Miso is lovely 🐱"]), Turn(chunks=["Yes"]))
    chat = await connect(user)
    await frame(chat, "off_start")
    await chat.ws.receive_from()
    await off_say(chat, "How is my cat Miso? 猫咪", mid=new_mid(1))
    await off_say(chat, "Does she still like the balcony?", mid=new_mid(2))
    first, second = llm_server.requests
    system = first["messages"][0]["content"]
    assert "card-7f3a" in system and "安娜" in system
    assert "My cat Miso loves the balcony" in system  # recall of the archived past
    assert [(m["role"], m["content"]) for m in second["messages"][1:]] == [
        ("user", "How is my cat Miso? 猫咪"), ("assistant", "Miso is lovely 🐱"),
        ("user", "Does she still like the balcony?"),
    ]
    assert "card-7f3a" in second["messages"][0]["content"]


async def test_a_line_for_a_conversation_this_socket_does_not_hold_is_refused_and_given_back_p5(
        connect, user, profile, llm_server, llm_provider):
    """P5: after a reconnect (or a reload) the socket holds no off-the-record conversation: the
    line is not answered and not archived, its text goes back, and the page says it ended."""
    chat = await connect(user)
    await chat.send("私密的话 🤫", mid=new_mid(1), action="off_send")
    refused = await chat.ws.receive_from()
    assert 'id="msg-c_0000000000000001" hx-swap-oob="delete"' in refused
    assert 'data-text="私密的话 🤫"' in refused and "already ended" in refused
    assert await chat.ws.receive_nothing()
    assert llm_server.requests == [] and await _counts(profile) == (0, 0)


async def test_an_on_the_record_frame_is_refused_while_the_page_is_off_the_record_p5(
        connect, user, profile, llm_server, llm_provider):
    """P5: a plain send (or edit, retry, regenerate) while off the record archives nothing."""
    chat = await connect(user)
    await frame(chat, "off_start")
    await chat.ws.receive_from()
    await chat.send("should not be archived", mid=new_mid(1))
    assert "off the record" in await chat.ws.receive_from()
    assert llm_server.requests == [] and await _counts(profile) == (0, 0)
    await frame(chat, "off_end")
    await chat.ws.receive_from()
    llm_server.script(Turn(chunks=["on the record"]))
    await chat.say("now archived", mid=new_mid(2))
    assert (await _counts(profile))[0] == 2


async def test_stop_works_off_the_record_and_ending_stops_the_reply_p5(
        connect, user, profile, llm_server, llm_provider):
    """P5 with U2: Stop ends the reply (kept on the page as stopped); End stops a reply in
    flight and nothing more of it reaches the page."""
    llm_server.script(Turn(chunks=["one ", "two ", "three ", "four"], chunk_delay=0.5),
                      Turn(chunks=["slow ", "slow ", "slow"], chunk_delay=0.5))
    chat = await connect(user)
    await frame(chat, "off_start")
    await chat.ws.receive_from()
    await chat.send("count 数一数", mid=new_mid(1), action="off_send")
    while "<span id=\"reply-" not in await chat.ws.receive_from():
        pass
    await frame(chat, "stop")
    frames = await chat.frames_until_reply()
    assert "stopped" in frames[-1] and "four" not in frames[-1]
    await chat.send("again", mid=new_mid(2), action="off_send")
    while "<span id=\"reply-" not in await chat.ws.receive_from():
        pass
    await frame(chat, "off_end")
    rest = []
    while not await chat.ws.receive_nothing(timeout=2):
        rest.append(await chat.ws.receive_from())
    assert any("Nothing of it was kept" in f for f in rest)
    assert not any("msg-a_" in f for f in rest)  # the stopped reply's final line never came
    assert await _counts(profile) == (0, 0)


async def test_offline_an_off_the_record_line_is_answered_from_memory_without_saying_it_is_saved_p5(
        connect, user, profile):
    """P5 with L2: offline, the answer does not claim the line is saved, and nothing is stored."""
    reset_provider(Offline())
    try:
        chat = await connect(user)
        await frame(chat, "off_start")
        await chat.ws.receive_from()
        frames = await off_say(chat, "zzqx 无关的话 🫥", mid=new_mid(1))
        assert "Nothing is kept off the record" in frames[-1] and "is saved" not in frames[-1]
        assert await _counts(profile) == (0, 0)
    finally:
        reset_provider(None)


async def test_a_model_failure_off_the_record_is_shown_and_nothing_is_kept_p5(
        connect, user, profile, llm_server, llm_provider, caplog):
    """P5 with L3: a failed reply says so on the page; no line is stored and no log line quotes it."""
    caplog.set_level(logging.DEBUG, logger="previously")
    marker = secrets.token_hex(6)
    llm_server.script(Turn(status=500, message="upstream broke"))
    chat = await connect(user)
    await frame(chat, "off_start")
    await chat.ws.receive_from()
    frames = await off_say(chat, f"秘密 {marker} 🔐", mid=new_mid(1))
    assert 'class="error"' in frames[-1] and "reply failed" in frames[-1]
    assert await _counts(profile) == (0, 0)
    assert marker not in caplog.text and "failed" in caplog.text
