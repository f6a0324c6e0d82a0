"""Regenerate with browsable alternatives, edit and resend (SPEC U2), and "why this reply"
(U4) checked against what the local model server received."""

import json
import re
from datetime import UTC, datetime

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from memory.archive import archive_message
from memory.deletion import hard_delete_message, hide_message
from memory.models import Message
from memory.recall.budget import approx_tokens
from tests.factories import ExperienceFactory
from tests.llm_server import Turn
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def lines(profile, *, live=None):
    qs = Message.objects.for_profile(profile).order_by("created_at", "id")
    if live is not None:
        qs = qs.filter(deleted_at__isnull=live)
    return list(qs.values_list("mid", "speaker", "content"))


async def frames_until(chat, needle: str) -> list[str]:
    frames = []
    while not frames or needle not in frames[-1]:
        frames.append(await chat.ws.receive_from(timeout=10))
    return frames


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


async def test_regenerate_keeps_the_earlier_replies_as_browsable_alternatives(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["first answer"]), Turn(chunks=["second answer"]), Turn(chunks=["third answer"]))
    chat = await connect(user)
    first = (await chat.say("a question 🙂", mid=new_mid(1)))[-1]
    first_mid = re.search(r'id="msg-(a_[^"]+)"', first).group(1)
    await chat.ws.send_to(text_data=json.dumps({"action": "regenerate", "mid": first_mid}))
    frames = await chat.frames_until_reply()
    assert f'<div id="msg-{first_mid}" hx-swap-oob="delete">' in frames[0]  # the old reply leaves the page
    assert "second answer" in frames[-1] and "2 / 2" in text(frames[-1])
    second_mid = re.search(r'id="msg-(a_[^"]+)"', frames[-1]).group(1)
    await chat.ws.send_to(text_data=json.dumps({"action": "regenerate", "mid": second_mid}))
    third = (await chat.frames_until_reply())[-1]
    assert "third answer" in third and "3 / 3" in text(third)
    third_mid = re.search(r'id="msg-(a_[^"]+)"', third).group(1)
    # The model saw the question each time, never an earlier alternative.
    for request in llm_server.requests:
        assert [m["role"] for m in request["messages"]] == ["system", "user"]
    # Every reply is in the archive; only the chosen one is live (so recall and the card see it alone).
    assert [c for _, s, c in await lines(profile) if s == "assistant"] == ["first answer", "second answer", "third answer"]
    assert [c for _, _, c in await lines(profile, live=True)] == ["a question 🙂", "third answer"]
    # Browse back to the first: it becomes the chosen one, shown in place of the third.
    await chat.ws.send_to(text_data=json.dumps({"action": "choose", "shown": third_mid, "mid": second_mid}))
    shown = await chat.ws.receive_from(timeout=5)
    assert f'hx-swap-oob="outerHTML:#msg-{third_mid}"' in shown and "second answer" in shown and "2 / 3" in text(shown)
    assert [c for _, _, c in await lines(profile, live=True)] == ["a question 🙂", "second answer"]
    # A regenerate of anything but the last live reply is refused.
    await chat.ws.send_to(text_data=json.dumps({"action": "regenerate", "mid": first_mid}))
    assert "Only the last reply can be regenerated" in await chat.ws.receive_from(timeout=5)


async def test_edit_and_resend_hides_the_old_line_and_its_reply_and_answers_the_new_one(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(chunks=["about cats"]), Turn(chunks=["about dogs 🐶"]))
    chat = await connect(user)
    await chat.say("tell me about cats", mid=new_mid(1))
    await chat.send("tell me about dogs", mid=new_mid(2), action="edit", edits=new_mid(1))
    frames = await chat.frames_until_reply()
    page = "".join(frames)
    assert f'<div id="msg-{new_mid(1)}" hx-swap-oob="delete">' in page
    assert "about dogs 🐶" in frames[-1]
    assert llm_server.requests[-1]["messages"][-1] == {"role": "user", "content": "tell me about dogs"}
    assert len(llm_server.requests[-1]["messages"]) == 2  # the old line and its reply are not replayed
    everything = await lines(profile)
    assert [c for _, _, c in everything] == ["tell me about cats", "about cats", "tell me about dogs", "about dogs 🐶"]
    assert [c for _, _, c in await lines(profile, live=True)] == ["tell me about dogs", "about dogs 🐶"]
    assert everything[2][0] == new_mid(2)  # a new mid
    # Only the last line of the person can be edited.
    await chat.send("again", mid=new_mid(3), action="edit", edits=new_mid(1))
    refused = await frames_until(chat, "Only your last line can be edited")
    assert f'<div id="msg-{new_mid(3)}" hx-swap-oob="delete">' in refused[-1]


async def test_why_this_reply_holds_ids_and_counts_matching_what_the_model_received(connect, user, profile, llm_server, llm_provider):
    await database_sync_to_async(archive_message)(
        profile=profile, mid=new_mid(90), speaker="user", content="我的猫叫 Mochi，她喜欢晒太阳",
        created_at=datetime(2025, 5, 1, 12, tzinfo=UTC),
    )
    experience = await database_sync_to_async(ExperienceFactory)(profile=profile, title="Mochi", content="a cat who loves sun", status="active")
    llm_server.script(Turn(chunks=["first"]), Turn(chunks=["Mochi **loves** the sun"]))
    chat = await connect(user)
    await chat.say("hello there", mid=new_mid(1))
    final = (await chat.say("how is Mochi the cat 猫 doing", mid=new_mid(2)))[-1]
    assert "Why this reply" in final
    reply = await Message.objects.filter(speaker="assistant").order_by("-created_at").afirst()
    trace = reply.prompt_trace
    sent = llm_server.requests[-1]["messages"]
    system = sent[0]["content"]
    recalled_line = await Message.objects.aget(mid=new_mid(90))
    assert trace["recalled"] == [recalled_line.pk] and recalled_line.content in system
    assert trace["experiences"] == [experience.pk] and "a cat who loves sun" in system
    assert trace["recent"] == len(sent) - 2 == 2  # "hello there" and "first" were replayed
    assert trace["tokens"]["system"] == approx_tokens(system)
    assert trace["tokens"]["recent"] == sum(approx_tokens(m["content"]) for m in sent[1:-1])
    assert trace["tokens"]["user"] == approx_tokens(sent[-1]["content"])
    assert trace["tokens"]["total"] == sum(approx_tokens(m["content"]) for m in sent)
    assert 0 < trace["tokens"]["recalled"] < trace["tokens"]["system"]
    stored = json.dumps(trace, ensure_ascii=False)
    assert "Mochi" not in stored and "猫" not in stored  # ids and counts, never text

    # The panel shows the recalled line with a link to its place in the archive.
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    panel = (await database_sync_to_async(client.get)(f"/chat/why/{reply.mid}/", HTTP_HX_REQUEST="true")).content.decode()
    assert "我的猫叫 Mochi" in panel and f"#msg-{new_mid(90)}" in panel and "a cat who loves sun" in panel
    # Deleting the recalled line for good leaves no copy behind: the panel says it is gone.
    await database_sync_to_async(hard_delete_message)(recalled_line)
    panel = (await database_sync_to_async(client.get)(f"/chat/why/{reply.mid}/", HTTP_HX_REQUEST="true")).content.decode()
    assert "Mochi，她" not in panel and "a line deleted since" in panel


async def test_regenerating_a_reply_whose_line_is_hidden_is_refused_not_moved_to_an_earlier_line(
        connect, user, profile, llm_server, llm_provider):
    """Issue 24 point 9: it was attached to the earlier line, which then showed "2 / 2"."""
    llm_server.script(Turn(chunks=["one"]), Turn(chunks=["two"]), Turn(chunks=["three"]))
    chat = await connect(user)
    await chat.say("first line", mid=new_mid(1))
    second = (await chat.say("second line", mid=new_mid(2)))[-1]
    second_mid = re.search(r'id="msg-(a_[^"]+)"', second).group(1)
    await database_sync_to_async(lambda: hide_message(Message.objects.get(mid=new_mid(2))))()
    await chat.ws.send_to(text_data=json.dumps({"action": "regenerate", "mid": second_mid}))
    assert "The line this reply answers is hidden" in await chat.ws.receive_from(timeout=5)
    assert len(llm_server.requests) == 2  # no model call
    live = await lines(profile, live=True)
    assert [c for _, _, c in live] == ["first line", "one", "two"]  # the reply stays; nothing moved
    replies_of_first = await database_sync_to_async(
        lambda: Message.objects.filter(reply_of__mid=new_mid(1)).count())()
    assert replies_of_first == 1
