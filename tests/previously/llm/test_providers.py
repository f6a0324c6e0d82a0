"""Providers (SPEC L1-L3) against a real local OpenAI-compatible HTTP server."""

import ssl

import httpx2
import pytest
from openai._utils._transform import async_maybe_transform
from openai.types.chat import completion_create_params

from memory.models import ModelChoice
from previously.agent import tools as agent_tools
from previously.llm import ProviderError, get_provider, reset_provider
from previously.llm.embeddings import OpenAIEmbeddings
from previously.llm.offline import Offline
from previously.llm.openai_compat import (
    OpenAICompatible,
    Timeouts,
    chat_completions,
    sdk_client,
    streamed,
)
from previously.llm.select import follow_stored_choice
from previously.tunables import TUNABLES
from tests.llm_server import Turn


async def collect(provider, messages):
    return [chunk async for chunk in provider.astream(messages)]


async def test_stream_yields_the_reply_chunk_by_chunk(llm_server, llm_provider):
    llm_server.script(Turn(chunks=["你好", "，", "Alex 🐱"]))
    chunks = await collect(llm_provider, [{"role": "user", "content": "hi"}])
    assert chunks == ["你好", "，", "Alex 🐱"]
    assert llm_server.requests[-1]["messages"] == [{"role": "user", "content": "hi"}]
    assert llm_server.requests[-1]["stream"] is True


async def test_a_streamed_chunk_stays_the_json_the_server_sent(llm_server, llm_provider):
    """BENCH §4: the SDK builds no typed model per chunk (~95 µs of the event loop each, a chunk
    per token of a real model): each chunk of the stream is the server's JSON, read by `streamed`."""
    llm_server.script(Turn(chunks=["你好", "Alex 🐱"]))
    stream = await chat_completions(llm_provider._async, {"model": "fake-model", "messages": PROMPT}, stream=True)
    chunks = [chunk async for chunk in stream]
    assert chunks and all(type(chunk) is dict for chunk in chunks)
    read = [streamed(chunk) for chunk in chunks]
    assert "".join(r[0] for r in read if r) == "你好Alex 🐱"
    assert [r[1] for r in read if r and r[1]] == ["stop"]


@pytest.mark.parametrize("chunk, read", [
    ({"choices": [{"index": 0, "delta": {"content": "好 🐱"}, "finish_reason": None}]}, ("好 🐱", None)),
    ({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, ("", "stop")),
    ({"choices": [{"index": 0, "delta": {"content": None, "role": "assistant"}}]}, ("", None)),
    ({"choices": [{"index": 0, "delta": None, "finish_reason": "length"}]}, ("", "length")),
    ({"choices": []}, None),  # a usage-only chunk
    ({"id": "x"}, None),
    ("not json object", None),
], ids=["text", "end", "null-content", "null-delta", "no-choice", "no-choices-key", "not-a-dict"])
def test_streamed_reads_each_shape_a_server_sends(chunk, read):
    assert streamed(chunk) == read


async def test_a_server_error_is_a_provider_error(llm_server, llm_provider):
    llm_server.script(Turn(status=500))
    with pytest.raises(ProviderError, match="500"):
        await collect(llm_provider, [{"role": "user", "content": "hi"}])


async def test_a_model_dying_mid_stream_is_a_provider_error_after_the_partial_text(llm_server, llm_provider):
    llm_server.script(Turn(chunks=["one ", "two ", "three"], die_after=2))
    received = []
    with pytest.raises(ProviderError):
        async for chunk in llm_provider.astream([{"role": "user", "content": "hi"}]):
            received.append(chunk)
    assert received == ["one ", "two "]


async def test_an_unreachable_server_is_a_provider_error():
    provider = OpenAICompatible(base_url="http://127.0.0.1:9/v1", api_key="", model="m")
    with pytest.raises(ProviderError, match="could not be reached"):
        await collect(provider, [{"role": "user", "content": "hi"}])


def test_tool_calls_come_back_with_their_arguments(llm_server, llm_provider):
    llm_server.script(Turn(tool_calls=[("set_portrait", {"text": "Alex 是工程师"})]))
    tools = [{"type": "function", "function": {"name": "set_portrait", "parameters": {"type": "object"}}}]
    completion = llm_provider.complete([{"role": "user", "content": "go"}], tools=tools)
    assert [c.name for c in completion.tool_calls] == ["set_portrait"]
    assert completion.tool_calls[0].parsed_arguments() == {"text": "Alex 是工程师"}
    assert llm_server.requests[-1]["tools"] == tools


def test_configured_base_url_selects_the_openai_compatible_provider(settings, llm_server):
    settings.PREVIOUSLY_LLM_BASE_URL = llm_server.base_url
    settings.PREVIOUSLY_LLM_MODEL = "fake-model"
    reset_provider(None)
    try:
        provider = get_provider()
        assert isinstance(provider, OpenAICompatible) and provider.model == "fake-model"
    finally:
        reset_provider(None)


def test_nothing_configured_and_no_ollama_means_offline_l2(settings):
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    settings.PREVIOUSLY_OLLAMA_URL = "http://127.0.0.1:9/v1"
    reset_provider(None)
    try:
        assert isinstance(get_provider(), Offline)
        assert get_provider().offline is True
    finally:
        reset_provider(None)


def test_a_local_ollama_is_used_when_it_answers(settings, llm_server):
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    settings.PREVIOUSLY_LLM_MODEL = ""
    settings.PREVIOUSLY_OLLAMA_URL = llm_server.base_url
    reset_provider(None)
    try:
        provider = get_provider()
        assert isinstance(provider, OpenAICompatible) and provider.model == "fake-model"
    finally:
        reset_provider(None)


@pytest.mark.django_db
def test_an_installed_provider_outlives_the_housekeeping_noticing_a_stored_change(settings, llm_provider):
    """The housekeeping pass follows the connections page (follow_stored_choice); a provider
    installed with reset_provider stays until reset. It once fell back to offline there, in a
    live test server whose housekeeping ticked mid-test (CI, stop 31: the settings page then
    showed a text box instead of the model list)."""
    settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS = 0
    ModelChoice.bump()
    follow_stored_choice()
    assert get_provider() is llm_provider


# --- timeouts per use (issue 19): a slow local CPU model must not hit a fixed 60 s wall ---


def provider_with(llm_server, **seconds):
    return OpenAICompatible(base_url=llm_server.base_url, api_key="", model="fake-model", timeouts=Timeouts(**seconds))


async def test_the_chat_waits_for_the_first_token_only_as_long_as_configured(llm_server):
    llm_server.script(Turn(delay=1.0, chunks=["late"]))
    provider = provider_with(llm_server, first_token=0.3, stream=30)
    with pytest.raises(ProviderError, match=r"nothing within 0.3 s \(PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS\)"):
        await collect(provider, [{"role": "user", "content": "hi"}])


async def test_a_slow_first_token_within_its_timeout_is_a_normal_reply(llm_server):
    llm_server.script(Turn(delay=0.4, chunks=["slow ", "but fine"]))
    provider = provider_with(llm_server, first_token=5, stream=30)
    assert await collect(provider, [{"role": "user", "content": "hi"}]) == ["slow ", "but fine"]


async def test_the_whole_stream_has_its_own_timeout(llm_server):
    llm_server.script(Turn(delay=1.0, chunks=["late"]))
    provider = provider_with(llm_server, first_token=30, stream=0.3)
    with pytest.raises(ProviderError, match=r"0.3 s \(PREVIOUSLY_LLM_STREAM_SECONDS\)"):
        await collect(provider, [{"role": "user", "content": "hi"}])


def test_an_agent_call_times_out_at_its_own_setting_and_says_which(llm_server):
    llm_server.script(Turn(delay=1.0, tool_calls=[("finish", {"summary": "x"})]))
    provider = provider_with(llm_server, agent_call=0.3)
    with pytest.raises(ProviderError, match=r"timed out after 0.3 s \(PREVIOUSLY_AGENT_CALL_SECONDS\)"):
        provider.complete([{"role": "user", "content": "hi"}], tools=[])
    assert len(llm_server.requests) == 1  # not retried by the SDK: the run's own retry covers it


def test_the_configured_provider_takes_the_timeouts_from_the_tunables(settings, llm_server):
    settings.PREVIOUSLY_LLM_BASE_URL = llm_server.base_url
    settings.PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS = 7
    settings.PREVIOUSLY_LLM_STREAM_SECONDS = 70
    settings.PREVIOUSLY_AGENT_CALL_SECONDS = 700
    reset_provider(None)
    try:
        provider = get_provider()
    finally:
        reset_provider(None)
    assert (provider.timeouts.first_token, provider.timeouts.stream, provider.timeouts.agent_call) == (7, 70, 700)


def test_the_default_timeouts_suit_a_local_cpu_model():
    assert TUNABLES["PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS"].default >= 120
    assert TUNABLES["PREVIOUSLY_AGENT_CALL_SECONDS"].default >= 300


def _tls_of(sdk) -> ssl.SSLContext:
    return sdk._client._transport._pool._ssl_context


def test_every_sdk_client_shares_one_verifying_tls_context(settings):
    """Issue 25 point 4: each SDK client read the CA store into a TLS context of its own (about
    25 ms of CPU, two per provider). They share one now, which still verifies certificates and
    host names as the SDK's own did."""
    provider = OpenAICompatible(base_url="https://models.example/v1", api_key="k", model="m")
    embeddings = OpenAIEmbeddings(base_url="https://embed.example/v1/", api_key="", model="e")
    contexts = {id(_tls_of(provider._sync)), id(_tls_of(provider._async)), id(_tls_of(embeddings._client)),
                id(_tls_of(sdk_client("https://other.example/v1", "", timeout=3, max_retries=1)))}
    assert len(contexts) == 1
    tls = _tls_of(provider._sync)
    assert tls.verify_mode == ssl.CERT_REQUIRED and tls.check_hostname
    assert tls.cert_store_stats()["x509_ca"] == httpx2.create_ssl_context().cert_store_stats()["x509_ca"]
    # The SDK's settings are still each client's own.
    assert (provider._sync.max_retries, provider._sync.timeout, provider._sync.api_key) == (0, 600.0, "k")
    assert str(embeddings._client.base_url) == "https://embed.example/v1/" and embeddings._client.api_key == "not-needed"


PROMPT = [
    {"role": "system", "content": "You are Mira. 你是 Alex 的朋友。\n\n## Previously On\n- likes 🐱"},
    {"role": "user", "content": "我昨天去了杭州 and it rained ☔"},
    {"role": "assistant", "content": "Hangzhou in the rain — 西湖 must have been quiet."},
    {"role": "user", "content": [{"type": "text", "text": "看这张"},
                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
]
AGENT_TURN = [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "set_portrait", "arguments": '{"text": "Alex 是工程师"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "ok: the portrait is set"},
]


@pytest.mark.parametrize("body, params", [
    ({"model": "m", "messages": PROMPT, "stream": True, "temperature": 0.7, "max_tokens": 800},
     completion_create_params.CompletionCreateParamsStreaming),
    ({"model": "m", "messages": PROMPT, "max_tokens": 1}, completion_create_params.CompletionCreateParamsNonStreaming),
    ({"model": "m", "messages": PROMPT + AGENT_TURN, "tools": agent_tools.schemas(agent_tools.CARD_PHASE), "max_tokens": 2000},
     completion_create_params.CompletionCreateParamsNonStreaming),
], ids=["chat-stream", "one-token", "agent-tools"])
async def test_the_sdk_typed_walk_chat_completions_skips_would_change_nothing_we_send(body, params):
    """Issue 24 point 11 (BENCH §4): chat_completions sends the body as it is, without the typed
    method's walk over every message (3.8 ms for 11 messages on a slow machine). For each kind of body the
    product sends (text and image parts in both scripts, tool calls and their results, the
    agent's tool schemas) the walk gives back the same body: a newer SDK that starts to
    rewrite one of them fails here."""
    assert await async_maybe_transform(body, params) == body


async def test_the_stream_and_the_agent_call_reach_the_server_as_built(llm_server, llm_provider):
    """The request chat_completions makes is the SDK's own: the same path and key, the body
    as built (chat stream, the one-token probe, the agent's tool call), the same answers."""
    llm_server.api_key = "sk-right"
    keyed = OpenAICompatible(base_url=llm_server.base_url, api_key="sk-right", model="fake-model")
    llm_server.script(Turn(chunks=["好", "的 🐱"]))
    assert await collect(keyed, PROMPT) == ["好", "的 🐱"]
    assert llm_server.requests[-1] == {"model": "fake-model", "messages": PROMPT, "stream": True}
    llm_server.script(Turn(tool_calls=[("set_portrait", {"text": "Alex"})]))
    offered = agent_tools.schemas(agent_tools.CARD_PHASE)
    done = keyed.complete(PROMPT + AGENT_TURN, tools=offered, max_tokens=50)
    assert [c.name for c in done.tool_calls] == ["set_portrait"]
    assert llm_server.requests[-1] == {"model": "fake-model", "messages": PROMPT + AGENT_TURN, "tools": offered,
                                       "max_tokens": 50}
    with pytest.raises(ProviderError, match="401"):
        await collect(llm_provider, PROMPT)  # no key: refused, as before
