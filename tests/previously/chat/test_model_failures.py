"""Model failures as the person sees them (issue 26 point 4, L3, A3): each one a clear notice in
the person's language, their line kept, no reply written as if complete. Against the local
scripted HTTP server (tests/llm_server.py): the real SDK sees real HTTP and real SSE."""

import pytest
from channels.db import database_sync_to_async

from memory.models import Message, Profile
from tests.llm_server import Turn
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)

FAILURES = {
    "401 wrong key": (Turn(status=401), "refused the API key (401)"),
    "404 model": (Turn(status=404), "does not know the model “fake-model” (404)"),
    "429 Retry-After": (Turn(status=429, headers={"Retry-After": "7"}), "busy (429). Your message is saved; try again in 7 s"),
    "500 mid-stream": (Turn(chunks=["I was ", "saying"], error_after=1), "The model server failed (500)"),
    "connection reset": (Turn(reset=True), "could not be reached"),
    "no [DONE]": (Turn(chunks=["half a"], no_done=True), "stopped before finishing its reply"),
    "whitespace only": (Turn(chunks=["  ", "\n\n", " "]), "nothing but blank space"),
    "context too long": (
        Turn(status=400, message="Requested tokens (9000) exceed context window of 8192"),
        "longer than the model",
    ),
}


@database_sync_to_async
def rows(profile):
    return list(Message.objects.for_profile(profile).order_by("created_at", "id").values_list("speaker", "content", "status"))


@pytest.mark.parametrize("name", FAILURES)
async def test_each_model_failure_is_a_clear_notice_and_the_line_is_kept(name, connect, user, profile, llm_server, llm_provider):
    turn, notice = FAILURES[name]
    llm_server.script(turn, Turn(chunks=["Back again."]))
    chat = await connect(user)
    frames = await chat.say("tell me", mid=new_mid(1))
    assert notice in frames[-1] and "Your message is saved" in frames[-1]
    assert "Traceback" not in "".join(frames)
    stored = await rows(profile)
    assert stored[0] == ("user", "tell me", "complete")  # A3: the line is kept
    assert stored[1][0] == "assistant" and stored[1][2] == "failed"  # never stored as a complete reply
    await chat.ws.send_json_to({"action": "retry", "mid": new_mid(1)})  # L3: retry works after it
    assert "Back again." in (await chat.frames_until_reply())[-1]


async def test_a_failure_notice_speaks_the_persons_language(connect, user, profile, llm_server, llm_provider):
    await database_sync_to_async(Profile.objects.filter(pk=profile.pk).update)(language="zh")
    llm_server.script(Turn(status=429, headers={"Retry-After": "7"}))
    chat = await connect(user)
    frames = await chat.say("你好", mid=new_mid(1))
    assert "模型服务器正忙（429）。你的消息已保存；请在 7 秒后重试。" in frames[-1]


async def test_the_reply_request_caps_its_output(connect, user, profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_REPLY_MAX_TOKENS = 77
    chat = await connect(user)
    await chat.say("hi", mid=new_mid(1))
    assert llm_server.requests[-1]["max_tokens"] == 77 and llm_server.requests[-1]["stream"] is True


async def test_a_prompt_over_the_known_window_gets_the_notice_without_a_model_call(
    connect, user, profile, llm_server, llm_provider, settings
):
    settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS = 600
    settings.PREVIOUSLY_REPLY_MAX_TOKENS = 100
    chat = await connect(user)
    frames = await chat.say("word " * 800, mid=new_mid(1))
    assert "longer than the model" in frames[-1]
    assert llm_server.requests == []
    assert [r[2] for r in await rows(profile)] == ["complete", "failed"]


async def test_a_stream_closed_with_nothing_in_it_asks_the_server_why_once(connect, user, profile, llm_server, llm_provider):
    """llama-cpp-python answers a prompt over its window with an event stream that closes
    before a single chunk (seen against the real server, issue 26 point 2); only the same
    request unstreamed says why. The person gets the window's notice, not "stopped before
    finishing", and the line is kept (A3)."""
    llm_server.script(
        Turn(no_done=True),  # 200, text/event-stream, nothing
        Turn(status=400, message="This model's maximum context length is 4096 tokens. However, you requested 7214 tokens"),
    )
    chat = await connect(user)
    frames = await chat.say("花" * 50, mid=new_mid(1))
    assert "longer than the model" in frames[-1] and "Your message is saved" in frames[-1]
    assert [r.get("stream") for r in llm_server.requests] == [True, None]
    assert llm_server.requests[1]["max_tokens"] == 1
    assert [r[2] for r in await rows(profile)] == ["complete", "failed"]


async def test_an_empty_stream_for_another_reason_stays_stopped_before_finishing(connect, user, profile, llm_server, llm_provider):
    llm_server.script(Turn(no_done=True), Turn(chunks=["fine now"]))  # the question is answered: no reason
    chat = await connect(user)
    frames = await chat.say("hello", mid=new_mid(1))
    assert "stopped before finishing its reply" in frames[-1]
