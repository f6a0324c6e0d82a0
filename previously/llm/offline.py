"""Offline mode (SPEC L2): no model; the chat answers from memory, never pretending."""

from collections.abc import AsyncIterator

from previously.llm.base import Completion, ProviderError


class Offline:
    name = "offline"
    model = ""
    offline = True
    supports_images = False

    async def astream(
        self, messages: list[dict], *, timeout: float | None = None, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> AsyncIterator[str]:
        raise ProviderError("no model configured")
        yield ""  # pragma: no cover - makes this an async generator

    def complete(
        self, messages: list[dict], *, tools: list[dict] | None = None, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> Completion:
        raise ProviderError("no model configured")
