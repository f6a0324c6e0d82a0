"""Choose the provider once per process: configured endpoint, else local Ollama, else offline."""

import json
import logging
import urllib.request

from django.conf import settings

from previously.llm.base import Provider
from previously.llm.offline import Offline
from previously.llm.openai_compat import OpenAICompatible, Timeouts

log = logging.getLogger(__name__)
OLLAMA_URL = "http://127.0.0.1:11434/v1"
_provider: Provider | None = None


def get_provider() -> Provider:
    global _provider
    if _provider is None:
        _provider = _choose()
        log.info("model provider: %s %s", _provider.name, _provider.model)
    return _provider


def reset_provider(provider: Provider | None = None) -> None:
    """Forget the choice (settings changed), or install one (tests)."""
    global _provider
    _provider = provider


def _choose() -> Provider:
    if settings.PREVIOUSLY_LLM_BASE_URL:
        return OpenAICompatible(
            base_url=settings.PREVIOUSLY_LLM_BASE_URL,
            api_key=settings.PREVIOUSLY_LLM_API_KEY,
            model=settings.PREVIOUSLY_LLM_MODEL or "default",
            supports_images=settings.PREVIOUSLY_LLM_IMAGES,
            timeouts=timeouts(),
        )
    model = _probe_ollama()
    if model:
        return OpenAICompatible(
            base_url=OLLAMA_URL, api_key="", model=settings.PREVIOUSLY_LLM_MODEL or model,
            supports_images=settings.PREVIOUSLY_LLM_IMAGES, timeouts=timeouts(),
        )
    return Offline()


def timeouts() -> Timeouts:
    """The per-use model timeouts from the tunables."""
    return Timeouts(
        first_token=settings.PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS,
        stream=settings.PREVIOUSLY_LLM_STREAM_SECONDS,
        agent_call=settings.PREVIOUSLY_AGENT_CALL_SECONDS,
    )


def _probe_ollama(timeout: float = 0.5) -> str | None:
    """The first model a local Ollama lists, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"{OLLAMA_URL}/models", timeout=timeout) as response:
            data = json.load(response)
    except (OSError, ValueError):
        return None
    models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]
    return models[0] if models else None


def agent_model() -> str:
    """The model name for the Previously Agent (defaults to the chat model)."""
    return settings.PREVIOUSLY_AGENT_MODEL or get_provider().model
