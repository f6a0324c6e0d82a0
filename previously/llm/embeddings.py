"""The OpenAI-compatible `/embeddings` provider for hybrid recall (SPEC R8, L1).

`PREVIOUSLY_EMBEDDINGS=openai` installs it into `memory.recall.embedding` at start-up
(`previously.apps`); Ollama, vLLM and hosted endpoints all speak this API.
"""

from collections.abc import Sequence

import numpy as np
import openai
from django.conf import settings

from memory.recall.embedding import normalised
from previously.llm.base import ProviderError

TIMEOUT = 10.0


class OpenAIEmbeddings:
    """Sentence vectors from an OpenAI-compatible endpoint, normalised like the local model's."""

    def __init__(self, *, base_url: str, api_key: str, model: str):
        self.model = model
        self.name = f"openai:{model}"[:64]
        self._client = openai.OpenAI(
            base_url=base_url.rstrip("/"), api_key=api_key or "not-needed", max_retries=0, timeout=TIMEOUT
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            response = self._client.embeddings.create(model=self.model, input=list(texts))
        except openai.OpenAIError as exc:
            raise ProviderError(f"the embeddings endpoint failed: {exc}") from exc
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise ProviderError(f"the embeddings endpoint returned {len(rows)} vectors for {len(texts)} texts")
        return normalised(np.asarray([r.embedding for r in rows], dtype=np.float32))


def from_settings() -> OpenAIEmbeddings | None:
    """The provider PREVIOUSLY_EMBEDDINGS=openai asks for, or None when it is not configured."""
    base_url = settings.PREVIOUSLY_EMBEDDING_BASE_URL or settings.PREVIOUSLY_LLM_BASE_URL
    if settings.PREVIOUSLY_EMBEDDINGS != "openai" or not base_url or not settings.PREVIOUSLY_EMBEDDING_MODEL:
        return None
    return OpenAIEmbeddings(
        base_url=base_url, api_key=settings.PREVIOUSLY_LLM_API_KEY, model=settings.PREVIOUSLY_EMBEDDING_MODEL
    )
