"""Any OpenAI-compatible Chat Completions endpoint, through the official SDK (SPEC L1)."""

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import openai

from previously.llm.base import Completion, ProviderError, ToolCall


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
        # Local servers need no key, but the SDK insists on one.
        key = api_key or "not-needed"
        stream_timeout = self.timeouts.stream
        agent_timeout = self.timeouts.agent_call
        self._async = openai.AsyncOpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=stream_timeout)
        # No retry: a timed-out agent call retried would double the wait; the run's own retry covers it.
        self._sync = openai.OpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=agent_timeout)

    async def astream(
        self, messages: list[dict], *, timeout: float | None = None, model: str | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[str]:
        """The reply as it arrives: the first words within `timeout` (default: the first-token
        timeout), the whole reply within the stream timeout."""
        first_token = timeout or self.timeouts.first_token
        deadline = time.monotonic() + self.timeouts.stream
        extra = {} if temperature is None else {"temperature": temperature}
        stream = None
        try:
            try:
                async with asyncio.timeout(first_token):
                    stream = await self._async.chat.completions.create(
                        model=model or self.model, messages=messages, stream=True, **extra
                    )
                    chunks = aiter(stream)
                    first = await anext(chunks, None)
            except TimeoutError:
                raise ProviderError(
                    f"the model sent nothing within {first_token:g} s (PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS)"
                ) from None
            finished = False
            pending = [first] if first is not None else []
            while True:
                if pending:
                    chunk = pending.pop()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ProviderError(
                            f"the reply took longer than {self.timeouts.stream:g} s (PREVIOUSLY_LLM_STREAM_SECONDS)"
                        )
                    try:
                        async with asyncio.timeout(left):
                            chunk = await anext(chunks, None)
                    except TimeoutError:
                        raise ProviderError(
                            f"the reply took longer than {self.timeouts.stream:g} s (PREVIOUSLY_LLM_STREAM_SECONDS)"
                        ) from None
                    if chunk is None:
                        break
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                if choice.delta is not None and choice.delta.content:
                    yield choice.delta.content
                finished = finished or choice.finish_reason is not None
        except openai.OpenAIError as exc:
            raise ProviderError(_describe(exc, self.timeouts.stream, "PREVIOUSLY_LLM_STREAM_SECONDS")) from exc
        except OSError as exc:  # the connection dropped under the SDK's reader
            raise ProviderError(f"the model connection broke: {exc}") from exc
        finally:
            if stream is not None:
                await stream.close()
        if not finished:
            # A server that dies mid-reply just closes the stream; the real end carries a reason.
            raise ProviderError("the model stopped before finishing its reply")

    def complete(
        self, messages: list[dict], *, tools: list[dict] | None = None, model: str | None = None,
        temperature: float | None = None,
    ) -> Completion:
        kwargs = {"model": model or self.model, "messages": messages}
        if temperature is not None:
            kwargs["temperature"] = temperature
        if tools:
            kwargs["tools"] = tools
        try:
            response = self._sync.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise ProviderError(_describe(exc, self.timeouts.agent_call, "PREVIOUSLY_AGENT_CALL_SECONDS")) from exc
        if not response.choices:
            raise ProviderError("the model returned no choices")
        choice = response.choices[0]
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "")
            for c in (choice.message.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        return Completion(content=choice.message.content or "", tool_calls=calls, finish_reason=choice.finish_reason or "stop")


def list_models(base_url: str, api_key: str = "", timeout: float = 3.0) -> list[str] | None:
    """The model ids the endpoint lists (GET /models), sorted; None when it lists none or
    cannot be asked — the settings page then takes a typed name."""
    key = api_key or "not-needed"
    client = openai.OpenAI(base_url=base_url.rstrip("/"), api_key=key, max_retries=0, timeout=timeout)
    try:
        ids = sorted({m.id for m in client.models.list() if getattr(m, "id", None)})
    except (openai.OpenAIError, OSError):
        return None
    return ids or None


def _describe(exc: Exception, seconds: float = 0, setting: str = "") -> str:
    if isinstance(exc, openai.APITimeoutError):
        return f"the model timed out after {seconds:g} s ({setting})" if setting else "the model timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "the model server could not be reached"
    if isinstance(exc, openai.APIStatusError):
        return f"the model server answered {exc.status_code}"
    return f"the model failed: {exc}"
