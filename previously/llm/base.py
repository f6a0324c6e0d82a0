"""The provider interface: streamed chat replies and tool-calling completions."""

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol


class ProviderError(Exception):
    """The model failed: unreachable, refused, timed out, or died mid-stream.

    `str(exc)` is the English detail for logs and run records; `notice` is what the person is
    shown (a lazy translation, rendered in their language), defaulting to the detail."""

    def __init__(self, message: str, *, notice=None, retry_after: float | None = None):
        super().__init__(message)
        self.notice = notice if notice is not None else message
        self.retry_after = retry_after


class Preempted(ProviderError):
    """A background call closed in favour of a person's turn (previously.llm.gate)."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text exactly as the model produced it

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError with a message a model can act on."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments of {self.name} are not valid JSON: {exc.msg}") from exc
        if not isinstance(value, dict):
            raise ValueError(f"arguments of {self.name} must be a JSON object")
        return value


@dataclass(frozen=True)
class Completion:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int | None = None  # as the server counted the request, when it says


class Provider(Protocol):
    name: str  # shown in the UI: e.g. "OpenAI-compatible at http://…" or "offline"
    model: str
    offline: bool
    supports_images: bool

    def astream(
        self, messages: list[dict], *, timeout: float | None = None, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> AsyncIterator[str]:
        """Yield the reply's text as it arrives; raise ProviderError on failure. `model` and
        `temperature` override the provider's own (a companion's settings); `max_tokens` caps
        the reply (previously.llm.select.output_cap)."""
        ...

    def complete(
        self, messages: list[dict], *, tools: list[dict] | None = None, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> Completion:
        """One completion, with tool calls when `tools` are offered: background work, which
        waits for (or gives way to) a person's turn (previously.llm.gate)."""
        ...
