"""Choose the provider: the environment's endpoint, else the connection staff chose in the
browser (O4), else a local Ollama, else offline; and tune it per companion (issue 17 point 8): a
profile's own model and temperature, falling back to the environment's (PREVIOUSLY_LLM_MODEL, the
endpoint's default temperature).

The choice is kept per process. A change made on the connections page bumps
`ModelChoice.version`; each process compares it at most every PREVIOUSLY_CONNECTION_CHECK_SECONDS
and chooses again, so no restart is needed, in any process. A provider installed with
`reset_provider(provider)` (tests) stays until reset."""

import asyncio
import json
import logging
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connections

from memory.models import ModelChoice
from memory.sealed import Unreadable, unseal
from previously.llm.base import Provider
from previously.llm.offline import Offline
from previously.llm.openai_compat import OpenAICompatible, Timeouts, context_window, list_models

log = logging.getLogger(__name__)
OLLAMA_URL = "http://127.0.0.1:11434/v1"
_provider: Provider | None = None
# What the choice was made from: the version of the stored choices, when it was last compared,
# whether a test pinned the provider, the key and agent model of a stored connection.
_state = {"version": None, "checked": 0.0, "pinned": False, "api_key": "", "agent_model": ""}


def get_provider() -> Provider:
    global _provider
    if _provider is not None and not _state["pinned"] and _stored_choice_changed():
        _provider = None
    if _provider is None:
        _provider = _choose()
        log.info("model provider: %s %s", _provider.name, _provider.model)
    return _provider


def reset_provider(provider: Provider | None = None) -> None:
    """Forget the choice (settings changed), or install one (tests)."""
    global _provider
    _provider = provider
    _state.update(pinned=provider is not None, version=None, checked=0.0)
    _window.clear()


def _off_the_loop(read):
    """Run the database read `read` here, or in a thread when this thread runs an event loop
    (Django refuses the ORM there); a milliseconds-long read, once per change or check."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return read()

    def in_thread():
        try:
            return read()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(in_thread).result()


def _stored_choice_changed() -> bool:
    if settings.PREVIOUSLY_LLM_BASE_URL:
        return False  # the environment wins; nothing stored is read
    now = time.monotonic()
    if now - _state["checked"] < settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS:
        return False
    _state["checked"] = now
    try:
        version = _off_the_loop(ModelChoice.current_version)
    except Exception:  # noqa: BLE001 - no database here (a command before migrate): keep the choice
        log.warning("model connections could not be read", exc_info=True)
        return False
    return version != _state["version"]


def _stored() -> tuple[int, dict | None]:
    """The stored choice's version and its chat connection (base URL, key, models), if any."""
    choice = ModelChoice.current()
    conn = choice.chat_connection
    if conn is None:
        return choice.version, None
    return choice.version, {"base_url": conn.base_url, "sealed_key": conn.sealed_key,
                            "chat_model": choice.chat_model, "agent_model": choice.agent_model}


def _from_connection() -> Provider | None:
    try:
        version, stored = _off_the_loop(_stored)
    except Exception:  # noqa: BLE001 - see _stored_choice_changed
        log.warning("model connections could not be read", exc_info=True)
        return None
    _state.update(version=version, checked=time.monotonic(), api_key="", agent_model="")
    if stored is None:
        return None
    try:
        key = unseal(stored["sealed_key"])
    except Unreadable:
        log.error("the chosen connection's API key cannot be read (PREVIOUSLY_CONNECTION_SECRET changed?)")
        return None
    _state.update(api_key=key, agent_model=stored["agent_model"])
    return OpenAICompatible(
        base_url=stored["base_url"], api_key=key,
        model=settings.PREVIOUSLY_LLM_MODEL or stored["chat_model"] or "default",
        supports_images=settings.PREVIOUSLY_LLM_IMAGES, timeouts=timeouts(),
    )


def _choose() -> Provider:
    if not settings.PREVIOUSLY_LLM_BASE_URL:
        chosen = _from_connection()
        if chosen is not None:
            return chosen
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


# Every model call caps its output (issue 26 point 1): a small local model otherwise writes
# until its context is full. One setting per use.
OUTPUT_CAPS = {
    "reply": "PREVIOUSLY_REPLY_MAX_TOKENS",
    "agent": "PREVIOUSLY_AGENT_STEP_MAX_TOKENS",
    "analyzer": "PREVIOUSLY_ANALYZER_MAX_TOKENS",
    "proactive": "PREVIOUSLY_PROACTIVE_MAX_TOKENS",
}


def output_cap(use: str) -> int:
    """The `max_tokens` of one model call for `use` (a key of OUTPUT_CAPS)."""
    return getattr(settings, OUTPUT_CAPS[use])


_window: dict[str, int | None] = {}
# One question to the server at a time: the turns that arrive while it is asked (the first ones
# after a start, while the server's warm-up asks) wait for its answer rather than each asking.
_window_lock = threading.Lock()


def known_context_tokens() -> tuple[bool, int | None]:
    """(True, what `context_tokens` answers) when it would answer without asking the model
    server (set, offline, or asked already), else (False, None): a turn reads it on the event
    loop rather than going to a thread for it (issue 24 point 11)."""
    if settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS:
        return True, settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS
    provider = get_provider()
    base_url = getattr(provider, "base_url", "")
    if provider.offline or not base_url:
        return True, None
    if base_url in _window:
        return True, _window.get(base_url)
    return False, None


def context_tokens() -> int | None:
    """The model's context window in tokens: PREVIOUSLY_MODEL_CONTEXT_TOKENS when set, else
    what the configured server reports (asked once per process), else None (unknown)."""
    known, window = known_context_tokens()
    if known:
        return window
    base_url = getattr(get_provider(), "base_url", "")
    if base_url not in _window:
        with _window_lock:
            if base_url not in _window:
                api_key = (settings.PREVIOUSLY_LLM_API_KEY if base_url == settings.PREVIOUSLY_LLM_BASE_URL.rstrip("/")
                           else _state["api_key"])
                _window[base_url] = context_window(base_url, api_key)
                log.info("model context window at %s: %s tokens", base_url, _window[base_url])
    return _window.get(base_url)


def _probe_ollama(timeout: float = 0.5) -> str | None:
    """The first model a local Ollama lists, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"{OLLAMA_URL}/models", timeout=timeout) as response:
            data = json.load(response)
    except (OSError, ValueError):
        return None
    models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]
    return models[0] if models else None


def agent_model(profile=None) -> str:
    """The model name for the Previously Agent: PREVIOUSLY_AGENT_MODEL, else the companion's
    chat model, else the environment's."""
    provider = get_provider()
    return (settings.PREVIOUSLY_AGENT_MODEL or _state["agent_model"] or getattr(profile, "model", "")
            or provider.model)


class Tuned:
    """The process's provider with one companion's model and temperature; everything else
    (name, offline, images) is the provider's own."""

    def __init__(self, base: Provider, *, model: str = "", temperature: float | None = None):
        self.base = base
        self.model = model or base.model
        self.temperature = temperature
        self.own_model = bool(model)

    def __getattr__(self, name):
        return getattr(self.base, name)

    def astream(self, messages: list[dict], *, timeout: float | None = None, max_tokens: int | None = None, **_ignored):
        return self.base.astream(
            messages, timeout=timeout, model=self.model, temperature=self.temperature, max_tokens=max_tokens
        )

    def complete(
        self, messages: list[dict], *, tools: list[dict] | None = None, model: str | None = None,
        max_tokens: int | None = None, **_ignored,
    ):
        return self.base.complete(
            messages, tools=tools, model=model or self.model, temperature=self.temperature, max_tokens=max_tokens
        )


def provider_for(profile) -> Provider:
    """The provider as this companion's settings tune it (read from `profile` as loaded)."""
    base = get_provider()
    model = getattr(profile, "model", "") or ""
    temperature = getattr(profile, "temperature", None)
    if not model and temperature is None:
        return base
    return Tuned(base, model=model, temperature=temperature)


def offered_models() -> list[str] | None:
    """The models the configured endpoint lists, for the settings page; None offline or when
    the endpoint lists none."""
    provider = get_provider()
    base_url = getattr(provider, "base_url", "")
    if provider.offline or not base_url:
        return None
    api_key = settings.PREVIOUSLY_LLM_API_KEY if base_url == settings.PREVIOUSLY_LLM_BASE_URL.rstrip("/") else _state["api_key"]
    return list_models(base_url, api_key)
