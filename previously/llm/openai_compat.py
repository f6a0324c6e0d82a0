"""Any OpenAI-compatible Chat Completions endpoint, through the official SDK (SPEC L1)."""

import asyncio
import functools
import json
import logging
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx2
import openai
from django.conf import settings
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy
from openai._base_client import AsyncHttpxClientWrapper, SyncHttpxClientWrapper
from openai.types.chat import ChatCompletion

from previously.llm import gate
from previously.llm.base import Completion, Preempted, ProviderError, ToolCall

log = logging.getLogger(__name__)

PREEMPT_RETRIES = 3  # a background call set aside for a person's turn is tried again this often


@functools.cache
def _tls() -> ssl.SSLContext:
    """The process's one TLS context, made as the SDK's HTTP client makes its own (the system's
    CA store, or SSL_CERT_FILE / SSL_CERT_DIR). Each client made one afresh, about 25 ms of CPU
    on a 2-core machine, and a provider has two: the settings and connection pages, the model
    lists and every test that builds a provider paid it (issue 25 point 4). An SSLContext is
    safe to share between threads and clients."""
    return httpx2.create_ssl_context()


def sdk_client(base_url: str, api_key: str, *, timeout: float, max_retries: int, asynchronous: bool = False):
    """The SDK's client for an OpenAI-compatible endpoint: the HTTP client the SDK would make for
    itself (its own wrapper classes, with its defaults, closed when dropped; they live in its
    private `_base_client`, pinned by the lock, so an upgrade that moves them fails at import),
    on the shared TLS context. Every SDK client of the product is made here. Local servers need
    no key, but the SDK insists on one."""
    base_url = base_url.rstrip("/")
    http_class, sdk_class = ((AsyncHttpxClientWrapper, openai.AsyncOpenAI) if asynchronous
                             else (SyncHttpxClientWrapper, openai.OpenAI))
    http = http_class(base_url=base_url, timeout=timeout, verify=_tls())
    return sdk_class(base_url=base_url, api_key=api_key or "not-needed", max_retries=max_retries, timeout=timeout,
                     http_client=http)


def chat_completions(client: openai.OpenAI | openai.AsyncOpenAI, body: dict, *, stream: bool = False):
    """POST /chat/completions with `body` as it is: the SDK's own request (its generic `post`,
    as `chat.completions.create` makes it: the same path, key, timeout, errors, response and
    stream types), without the typed method's walk over the body. That walk checks every
    message against each of the six message types, on the event loop for the chat: on a slow
    2-core machine 3.8 ms for 11 messages, 10.3 ms for 31, and about 12 ms for one agent step
    with its tool schemas; with the load test's short prompts, the SDK's part of a turn under
    the interpreter lock fell from 5-8 ms to 2-4 ms (BENCH §4, issue 24 point 11). For the plain
    JSON bodies built here it changes nothing (test_providers pins that for each kind of
    body). Every chat completion of the product is asked for here; `client.post` is a
    coroutine for the async client."""
    stream_class = openai.AsyncStream if isinstance(client, openai.AsyncOpenAI) else openai.Stream
    return client.post("/chat/completions", body={**body, "stream": True} if stream else body, cast_to=ChatCompletion,
                       options={"security": {"bearer_auth": True}}, stream=stream,
                       stream_cls=stream_class[object])


def streamed(chunk: object) -> tuple[str, str | None] | None:
    """(text, finish reason) of one streamed chunk, None for a chunk with no choice. A stream
    from `chat_completions` yields each chunk as the JSON the server sent (the SDK's stream of
    `object`: its errors, its end, no model built): a typed `ChatCompletionChunk` cost ~95 µs
    of the event loop per chunk, and a real model streams a chunk per token, for every person
    at once (BENCH §4)."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return None
    delta = choices[0].get("delta")
    text = delta.get("content") if isinstance(delta, dict) else None
    return (text if isinstance(text, str) else ""), choices[0].get("finish_reason")


@dataclass(frozen=True)
class Timeouts:
    """Seconds per use (tunables PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS, PREVIOUSLY_LLM_STREAM_SECONDS,
    PREVIOUSLY_AGENT_CALL_SECONDS); the defaults suit a small model on a laptop CPU, where
    reading a long prompt takes minutes."""

    first_token: float = 180.0  # the chat waits this long for a reply's first words
    stream: float = 600.0  # and this long for the whole streamed reply
    agent_call: float = 600.0  # one tool-calling request of the agent or the analyzer


class OpenAICompatible:
    offline = False

    def __init__(
        self, *, base_url: str, api_key: str, model: str, supports_images: bool = True, timeouts: Timeouts | None = None
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"OpenAI-compatible at {self.base_url}"
        self.supports_images = supports_images
        self.timeouts = timeouts or Timeouts()
        self._async = sdk_client(self.base_url, api_key, timeout=self.timeouts.stream, max_retries=0, asynchronous=True)
        # No retry: a timed-out agent call retried would double the wait; the run's own retry covers it.
        self._sync = sdk_client(self.base_url, api_key, timeout=self.timeouts.agent_call, max_retries=0)

    async def astream(
        self, messages: list[dict], *, timeout: float | None = None, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> AsyncIterator[str]:
        """The reply as it arrives: the first words within `timeout` (default: the first-token
        timeout), the whole reply within the stream timeout, at most `max_tokens` long. A reply
        of nothing but blank space is a failure too."""
        first_token = timeout or self.timeouts.first_token
        deadline = time.monotonic() + self.timeouts.stream
        extra = {} if temperature is None else {"temperature": temperature}
        if max_tokens:
            extra["max_tokens"] = max_tokens
        said = False
        stream = None
        try:
            try:
                async with asyncio.timeout(first_token):
                    stream = await chat_completions(
                        self._async, {"model": model or self.model, "messages": messages, **extra}, stream=True
                    )
                    chunks = aiter(stream)
                    first = await anext(chunks, None)
            except TimeoutError:
                raise ProviderError(
                    f"the model sent nothing within {first_token:g} s (PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS)",
                    notice=_timeout_notice(first_token, "PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS"),
                ) from None
            finished = False
            pending = [first] if first is not None else []

            def too_long() -> ProviderError:  # made when it happens, not for every chunk
                return ProviderError(
                    f"the reply took longer than {self.timeouts.stream:g} s (PREVIOUSLY_LLM_STREAM_SECONDS)",
                    notice=_timeout_notice(self.timeouts.stream, "PREVIOUSLY_LLM_STREAM_SECONDS"),
                )

            while True:
                if pending:
                    chunk = pending.pop()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise too_long()
                    try:
                        async with asyncio.timeout(left):
                            chunk = await anext(chunks, None)
                    except TimeoutError:
                        raise too_long() from None
                    if chunk is None:
                        break
                if (read := streamed(chunk)) is None:
                    continue
                text, finish = read
                if text:
                    said = said or bool(text.strip())
                    yield text
                finished = finished or finish is not None
        except openai.OpenAIError as exc:
            raise failure(exc, self.timeouts.stream, "PREVIOUSLY_LLM_STREAM_SECONDS", model or self.model) from exc
        except (OSError, httpx2.HTTPError) as exc:  # the connection dropped under the SDK's reader
            raise ProviderError(f"the model connection broke: {exc}", notice=BROKE) from exc
        finally:
            if stream is not None:
                await stream.close()
        if not finished:
            if first is None:  # closed before a single chunk: llama-cpp-python's answer to a prompt too long
                await self._why_nothing_came(messages, model=model or self.model, timeout=first_token)
            # A server that dies mid-reply just closes the stream; the real end carries a reason.
            raise ProviderError("the model stopped before finishing its reply", notice=UNFINISHED)
        if not said:
            raise ProviderError("the model's reply was empty (only blank space)", notice=BLANK)

    async def _why_nothing_came(self, messages: list[dict], *, model: str, timeout: float) -> None:
        """A stream that opened and closed with nothing in it says no reason: llama-cpp-python
        opens the event stream before it counts the prompt, then closes it when the prompt does
        not fit its window. The same request unstreamed, for one token, gets the server's
        reason (a 400 naming the context length), raised as the failure it is; any other answer
        leaves the caller's "stopped before finishing". Asked twice at most: the pooled
        connection that stream came on is dead, and the first request after it may get it."""
        for _ in range(2):
            try:
                async with asyncio.timeout(timeout):
                    await chat_completions(self._async, {"model": model, "messages": messages, "max_tokens": 1})
                return
            except openai.APIConnectionError:
                continue
            except openai.APIStatusError as exc:
                if _too_long(exc):
                    raise failure(exc, model=model) from exc
                return
            except (openai.OpenAIError, OSError, httpx2.HTTPError, TimeoutError):
                return

    def complete(
        self, messages: list[dict], *, tools: list[dict] | None = None, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> Completion:
        """Background work (agent steps, analyzer, proactive): waits while a person's turn is in
        flight; without tools it is streamed and gives way to a turn that starts meanwhile,
        then is tried again (previously.llm.gate)."""
        kwargs = {"model": model or self.model, "messages": messages}
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if tools:
            kwargs["tools"] = tools
        if not settings.PREVIOUSLY_LLM_TURNS_FIRST:  # a server that serves many requests at once
            return self._complete(kwargs)
        for attempt in range(PREEMPT_RETRIES + 1):
            gate.wait_idle(self.timeouts.agent_call)
            try:
                return self._complete(kwargs) if tools else self._complete_streamed(kwargs)
            except Preempted:
                if attempt == PREEMPT_RETRIES:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _complete_streamed(self, kwargs: dict) -> Completion:
        text: list[str] = []
        finish = None
        try:
            stream = chat_completions(self._sync, kwargs, stream=True)
            with stream:
                for chunk in stream:
                    if gate.person_waiting():
                        raise Preempted("set aside for a person's turn")
                    if (read := streamed(chunk)) is not None:
                        text.append(read[0])
                        finish = read[1] or finish
        except openai.OpenAIError as exc:
            raise failure(exc, self.timeouts.agent_call, "PREVIOUSLY_AGENT_CALL_SECONDS", kwargs["model"]) from exc
        except (OSError, httpx2.HTTPError) as exc:
            raise ProviderError(f"the model connection broke: {exc}", notice=BROKE) from exc
        if finish is None:
            raise ProviderError("the model stopped before finishing its reply", notice=UNFINISHED)
        return Completion(content="".join(text), finish_reason=finish)

    def _complete(self, kwargs: dict) -> Completion:
        try:
            response = chat_completions(self._sync, kwargs)
        except openai.OpenAIError as exc:
            raise failure(exc, self.timeouts.agent_call, "PREVIOUSLY_AGENT_CALL_SECONDS", kwargs["model"]) from exc
        except (OSError, httpx2.HTTPError) as exc:
            raise ProviderError(f"the model connection broke: {exc}", notice=BROKE) from exc
        if not response.choices:
            raise ProviderError("the model returned no choices")
        choice = response.choices[0]
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "")
            for c in (choice.message.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        usage = getattr(response, "usage", None)
        return Completion(
            content=choice.message.content or "", tool_calls=calls, finish_reason=choice.finish_reason or "stop",
            prompt_tokens=getattr(usage, "prompt_tokens", None),
        )


def model_ids(client: openai.OpenAI) -> list[str]:
    """The model ids an endpoint lists (GET /models), sorted; raises the SDK's errors."""
    return sorted({m.id for m in client.models.list() if getattr(m, "id", None)})


def list_models(base_url: str, api_key: str = "", timeout: float = 3.0) -> list[str] | None:
    """The model ids the endpoint lists (GET /models), sorted; None when it lists none or
    cannot be asked — the settings page then takes a typed name. One retry: a dropped
    connection on a busy machine should not turn the model picker into a text box."""
    client = sdk_client(base_url, api_key, timeout=timeout, max_retries=1)
    began = time.monotonic()
    try:
        ids = model_ids(client)
    except (openai.OpenAIError, OSError) as error:
        log.warning("model list from %s: %s after %.1f s", base_url, error, time.monotonic() - began)
        return None
    return ids or None


def context_window(base_url: str, api_key: str = "", timeout: float = 3.0) -> int | None:
    """The model's context window in tokens as the server reports it, or None: llama.cpp's
    server gives `n_ctx` in GET /props (`default_generation_settings`); llama-cpp-python's
    and llama.cpp's GET /v1/models give it in each model's `meta` (`n_ctx`, or `n_ctx_train`
    when the server was not told one)."""
    root = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    for url in (f"{root.removesuffix('/v1')}/props", f"{root}/models"):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
                data = json.load(response)
        except (OSError, ValueError):
            continue
        found = _n_ctx(data)
        if found:
            return found
    return None


def _n_ctx(data) -> int | None:
    if not isinstance(data, dict):
        return None
    for holder in (data, data.get("default_generation_settings") or {}):
        if isinstance(holder, dict) and isinstance(holder.get("n_ctx"), int) and holder["n_ctx"] > 0:
            return holder["n_ctx"]
    for model in data.get("data") or []:
        meta = model.get("meta") if isinstance(model, dict) else None
        if isinstance(meta, dict):
            for key in ("n_ctx", "n_ctx_train"):
                if isinstance(meta.get(key), int) and meta[key] > 0:
                    return meta[key]
    return None


# What the person is told (issue 26 point 4): their line is kept (A3) whatever failed.
BROKE = gettext_lazy("The connection to the model broke. Your message is saved; try again.")
UNFINISHED = gettext_lazy("The model stopped before finishing its reply. Your message is saved; try again.")
BLANK = gettext_lazy(
    "The model answered with nothing but blank space. Your message is saved; try again, or choose another model."
)

TOO_LONG = gettext_lazy(
    "This conversation is longer than the model's context window, so it could not answer. Your "
    "message is saved; send a shorter message, or use a model with a larger window "
    "(PREVIOUSLY_MODEL_CONTEXT_TOKENS tells Previously the window)."
)


def _timeout_notice(seconds: float, setting: str):
    return format_lazy(
        gettext_lazy("The model did not answer within {seconds} s ({setting}). Your message is saved; try again."),
        seconds=f"{seconds:g}", setting=setting,
    )


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _too_long(exc: openai.APIStatusError) -> bool:
    """A refusal because the request does not fit the model's window, in the words llama.cpp,
    llama-cpp-python and vLLM use."""
    text = str(getattr(exc, "message", "") or exc).lower()
    return exc.status_code in (400, 413, 500) and any(
        word in text for word in ("context window", "context length", "n_ctx", "context size", "too long")
    )


def failure(exc: Exception, seconds: float = 0, setting: str = "", model: str = "") -> ProviderError:
    """The SDK's exception as a ProviderError: an English detail for the logs, and a notice
    for the person naming what failed and what to do."""
    if isinstance(exc, openai.APITimeoutError):
        detail = f"the model timed out after {seconds:g} s ({setting})" if setting else "the model timed out"
        return ProviderError(detail, notice=_timeout_notice(seconds, setting or "PREVIOUSLY_LLM_STREAM_SECONDS"))
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(
            "the model server could not be reached",
            notice=gettext_lazy("The model server could not be reached. Your message is saved; try again later."),
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = f"the model server answered {status}"
        if status in (401, 403):
            notice = format_lazy(gettext_lazy(
                "The model server refused the API key ({status}). Your message is saved; check PREVIOUSLY_LLM_API_KEY."
            ), status=status)
        elif status == 404:
            notice = format_lazy(gettext_lazy(
                "The model server does not know the model “{model}” (404). Your message is saved; choose another "
                "model in the companion's settings or PREVIOUSLY_LLM_MODEL."
            ), model=model)
        elif status == 429:
            wait = _retry_after(exc)
            detail += f" (Retry-After: {wait:g} s)" if wait is not None else ""
            notice = format_lazy(gettext_lazy(
                "The model server is busy (429). Your message is saved; try again in {seconds} s."
            ), seconds=f"{wait:g}") if wait is not None else gettext_lazy(
                "The model server is busy (429). Your message is saved; try again in a moment."
            )
            return ProviderError(detail, notice=notice, retry_after=wait)
        elif _too_long(exc):
            detail += f": the request does not fit the model's context window ({exc.message[:200]})"
            notice = TOO_LONG
        else:
            notice = format_lazy(gettext_lazy(
                "The model server failed ({status}). Your message is saved; try again."
            ), status=status)
        return ProviderError(detail, notice=notice)
    if isinstance(exc, openai.APIError):  # an error event inside the stream (llama.cpp, vLLM)
        code = getattr(exc, "code", None) or "stream"
        return ProviderError(f"the model server failed mid-reply ({code}): {exc.message[:200]}", notice=format_lazy(
            gettext_lazy("The model server failed ({status}). Your message is saved; try again."), status=code,
        ))
    return ProviderError(f"the model failed: {exc}")
