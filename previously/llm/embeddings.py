"""The OpenAI-compatible `/embeddings` provider for hybrid recall (SPEC R8, L1).

`memory.recall.embedding` builds it through `from_settings` (the `RECALL_REMOTE_EMBEDDER`
setting) when `PREVIOUSLY_EMBEDDINGS=openai`, or when the environment sets nothing and staff
chose a connection's model on the connections page (O4); Ollama, vLLM and hosted endpoints
all speak this API.
"""

import logging
from collections.abc import Sequence

import numpy as np
import openai
from django.conf import settings

from memory.models import ModelChoice
from memory.recall.embedding import normalised
from memory.sealed import Unreadable, unseal
from previously.llm.base import ProviderError
from previously.llm.openai_compat import sdk_client

log = logging.getLogger(__name__)
TIMEOUT = 10.0


class OpenAIEmbeddings:
    """Sentence vectors from an OpenAI-compatible endpoint, normalised like the local model's."""

    def __init__(self, *, base_url: str, api_key: str, model: str):
        self.model = model
        self.name = f"openai:{model}"[:64]
        self._client = sdk_client(base_url, api_key, timeout=TIMEOUT, max_retries=0)

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
    """The provider PREVIOUSLY_EMBEDDINGS=openai asks for, else (the environment choosing
    nothing) the connection's model chosen on the connections page; None when not configured."""
    if not settings.PREVIOUSLY_EMBEDDINGS:
        return from_connection()
    base_url = settings.PREVIOUSLY_EMBEDDING_BASE_URL or settings.PREVIOUSLY_LLM_BASE_URL
    if settings.PREVIOUSLY_EMBEDDINGS != "openai" or not base_url or not settings.PREVIOUSLY_EMBEDDING_MODEL:
        return None
    return OpenAIEmbeddings(
        base_url=base_url, api_key=settings.PREVIOUSLY_LLM_API_KEY, model=settings.PREVIOUSLY_EMBEDDING_MODEL
    )


def from_connection() -> OpenAIEmbeddings | None:
    """The embedding model of a connection chosen on the connections page, or None (logged)
    when the choice names no connection or model, or the connection's key cannot be read."""
    choice = ModelChoice.objects.select_related("embedding_connection").filter(pk=1).first()
    conn = choice.embedding_connection if choice else None
    if conn is None or not choice.embedding_model:
        log.warning("embeddings by a connection were chosen, but no connection and model are: recall is lexical")
        return None
    try:
        key = unseal(conn.sealed_key)
    except Unreadable:
        log.error("the embedding connection's API key cannot be read (PREVIOUSLY_CONNECTION_SECRET changed?)")
        return None
    return OpenAIEmbeddings(base_url=conn.base_url, api_key=key, model=choice.embedding_model)
