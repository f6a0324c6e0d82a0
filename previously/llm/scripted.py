"""A scripted provider for tests only: replays the replies it is given, records the requests."""

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from previously.llm.base import Completion, ProviderError


class Scripted:
    name = "scripted (tests)"
    model = "scripted"
    offline = False
    supports_images = True

    def __init__(self, replies=(), completions=()):
        self.replies = deque(replies)  # each: list of chunks, or an Exception to raise
        self.completions = deque(completions)  # each: Completion, or an Exception
        self.requests: list[list[dict]] = []
        self.options: list[dict] = []  # the model and temperature each request asked for

    async def astream(
        self, messages: list[dict], *, timeout: float | None = None, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> AsyncIterator[str]:
        self.requests.append(messages)
        self.options.append({"model": model, "temperature": temperature, "max_tokens": max_tokens})
        if not self.replies:
            raise ProviderError("script exhausted")
        reply = self.replies.popleft()
        for chunk in reply:
            if isinstance(chunk, Exception):
                raise chunk
            await asyncio.sleep(0)
            yield chunk

    def complete(
        self, messages: list[dict], *, tools: list[dict] | None = None, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> Completion:
        self.requests.append(messages)
        self.options.append({"model": model, "temperature": temperature, "max_tokens": max_tokens})
        if not self.completions:
            raise ProviderError("script exhausted")
        item = self.completions.popleft()
        if isinstance(item, Exception):
            raise item
        return item
