"""Providers (SPEC L1-L3) against a real local OpenAI-compatible HTTP server."""

import pytest

from previously.llm import ProviderError, get_provider, reset_provider
from previously.llm.offline import Offline
from previously.llm.openai_compat import OpenAICompatible
from tests.llm_server import Turn


async def collect(provider, messages):
    return [chunk async for chunk in provider.astream(messages)]


async def test_stream_yields_the_reply_chunk_by_chunk(llm_server, llm_provider):
    llm_server.script(Turn(chunks=["你好", "，", "Alex 🐱"]))
    chunks = await collect(llm_provider, [{"role": "user", "content": "hi"}])
    assert chunks == ["你好", "，", "Alex 🐱"]
    assert llm_server.requests[-1]["messages"] == [{"role": "user", "content": "hi"}]
    assert llm_server.requests[-1]["stream"] is True


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


def test_nothing_configured_and_no_ollama_means_offline_l2(settings, monkeypatch):
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    monkeypatch.setattr("previously.llm.select.OLLAMA_URL", "http://127.0.0.1:9/v1")
    reset_provider(None)
    try:
        assert isinstance(get_provider(), Offline)
        assert get_provider().offline is True
    finally:
        reset_provider(None)


def test_a_local_ollama_is_used_when_it_answers(settings, monkeypatch, llm_server):
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    settings.PREVIOUSLY_LLM_MODEL = ""
    monkeypatch.setattr("previously.llm.select.OLLAMA_URL", llm_server.base_url)
    reset_provider(None)
    try:
        provider = get_provider()
        assert isinstance(provider, OpenAICompatible) and provider.model == "fake-model"
    finally:
        reset_provider(None)
