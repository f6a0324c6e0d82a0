"""Any OpenAI-compatible Chat Completions endpoint, through the official SDK (SPEC L1)."""

from collections.abc import AsyncIterator

import openai

from previously.llm.base import Completion, ProviderError, ToolCall

DEFAULT_TIMEOUT = 60.0


class OpenAICompatible:
    offline = False

    def __init__(self, *, base_url: str, api_key: str, model: str, supports_images: bool = True):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"OpenAI-compatible at {self.base_url}"
        self.supports_images = supports_images
        # Local servers need no key, but the SDK insists on one.
        key = api_key or "not-needed"
        self._async = openai.AsyncOpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=DEFAULT_TIMEOUT)
        self._sync = openai.OpenAI(base_url=self.base_url, api_key=key, max_retries=1, timeout=DEFAULT_TIMEOUT)

    async def astream(
        self, messages: list[dict], *, timeout: float | None = None, model: str | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[str]:
        extra = {} if temperature is None else {"temperature": temperature}
        try:
            stream = await self._async.chat.completions.create(
                model=model or self.model, messages=messages, stream=True, timeout=timeout or DEFAULT_TIMEOUT, **extra
            )
            finished = False
            async for chunk in stream:
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                if choice.delta is not None and choice.delta.content:
                    yield choice.delta.content
                finished = finished or choice.finish_reason is not None
        except openai.OpenAIError as exc:
            raise ProviderError(_describe(exc)) from exc
        except OSError as exc:  # the connection dropped under the SDK's reader
            raise ProviderError(f"the model connection broke: {exc}") from exc
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
            raise ProviderError(_describe(exc)) from exc
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


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "the model timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "the model server could not be reached"
    if isinstance(exc, openai.APIStatusError):
        return f"the model server answered {exc.status_code}"
    return f"the model failed: {exc}"
