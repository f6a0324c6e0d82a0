"""Choose the provider: the environment's endpoint, else the connection staff chose in the
browser (O4), else a local Ollama, else offline; and tune it per companion (issue 17 point 8): a
profile's own model and temperature, falling back to the environment's (PREVIOUSLY_LLM_MODEL, the
endpoint's default temperature).

The choice is kept per process. A change made on the connections page bumps
`ModelChoice.version`; each process compares it at most every PREVIOUSLY_CONNECTION_CHECK_SECONDS
and chooses again, so no restart is needed, in any process; the same change makes
`memory.recall.embedding` read its stored choice again (embeddings chosen on the page). A companion
whose model was picked from another connection's list is answered through that connection
(`provider_for`). A provider installed with `reset_provider(provider)` (tests) stays until reset."""

import asyncio
import json
import logging
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.db import connections
from django.utils.translation import gettext

from memory.models import Connection, ModelChoice
from memory.recall import embedding
from memory.sealed import Unreadable, unseal
from previously.llm.base import Provider
from previously.llm.offline import Offline
from previously.llm.openai_compat import OpenAICompatible, Timeouts, context_window, list_models

log = logging.getLogger(__name__)
_provider: Provider | None = None
# What the choice was made from: the version of the stored choices, when it was last compared,
# whether a test pinned the provider, the chosen connection and its agent model.
_state = {"version": None, "checked": 0.0, "pinned": False, "connection": None, "agent_model": ""}
_keys: dict[str, str] = {}  # base URL -> API key of the endpoints in use (context window, model lists)
_by_connection: dict[int, Provider | None] = {}  # companions' own connections (O4)


def get_provider() -> Provider:
    global _provider
    if not _state["pinned"]:
        follow_stored_choice()
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
    _by_connection.clear()


def follow_stored_choice() -> bool:
    """A change made on the connections page, in any process (ModelChoice.version, compared at
    most every PREVIOUSLY_CONNECTION_CHECK_SECONDS): forget the provider, the companions'
    connections and the embedding choice, so each is chosen again from what is stored now."""
    global _provider
    if not _stored_choice_changed():
        return False
    if not _state["pinned"]:  # a provider installed by reset_provider stays until reset
        _provider = None
    _by_connection.clear()
    embedding.forget_remote()
    return True


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
    if settings.PREVIOUSLY_LLM_BASE_URL and settings.PREVIOUSLY_EMBEDDINGS:
        return False  # the environment wins for all of it; nothing stored is read
    now = time.monotonic()
    if now - _state["checked"] < settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS:
        return False
    _state["checked"] = now
    try:
        version = _off_the_loop(ModelChoice.current_version)
    except Exception:  # noqa: BLE001 - no database here (a command before migrate): keep the choice
        log.warning("model connections could not be read", exc_info=True)
        return False
    changed = version != _state["version"]
    _state["version"] = version
    return changed


def _stored() -> tuple[int, dict | None]:
    """The stored choice's version and its chat connection (base URL, key, models), if any."""
    choice = ModelChoice.current()
    conn = choice.chat_connection
    if conn is None:
        return choice.version, None
    return choice.version, {"pk": conn.pk, "base_url": conn.base_url, "sealed_key": conn.sealed_key,
                            "chat_model": choice.chat_model, "agent_model": choice.agent_model}


def _from_connection() -> Provider | None:
    try:
        version, stored = _off_the_loop(_stored)
    except Exception:  # noqa: BLE001 - see _stored_choice_changed
        log.warning("model connections could not be read", exc_info=True)
        return None
    _state.update(version=version, checked=time.monotonic(), connection=None, agent_model="")
    if stored is None:
        return None
    try:
        key = unseal(stored["sealed_key"])
    except Unreadable:
        log.error("the chosen connection's API key cannot be read (PREVIOUSLY_CONNECTION_SECRET changed?)")
        return None
    _state.update(connection=stored["pk"], agent_model=stored["agent_model"])
    return _endpoint(stored["base_url"], key, settings.PREVIOUSLY_LLM_MODEL or stored["chat_model"] or "default")


def _endpoint(base_url: str, api_key: str, model: str) -> OpenAICompatible:
    """The provider for one OpenAI-compatible endpoint, with this server's image switch and timeouts."""
    _keys[base_url.rstrip("/")] = api_key
    return OpenAICompatible(base_url=base_url, api_key=api_key, model=model,
                            supports_images=settings.PREVIOUSLY_LLM_IMAGES, timeouts=timeouts())


def _choose() -> Provider:
    if not settings.PREVIOUSLY_LLM_BASE_URL:
        chosen = _from_connection()
        if chosen is not None:
            return chosen
    if settings.PREVIOUSLY_LLM_BASE_URL:
        return _endpoint(settings.PREVIOUSLY_LLM_BASE_URL, settings.PREVIOUSLY_LLM_API_KEY,
                         settings.PREVIOUSLY_LLM_MODEL or "default")
    model = _probe_ollama()
    if model:
        return _endpoint(settings.PREVIOUSLY_OLLAMA_URL, "", settings.PREVIOUSLY_LLM_MODEL or model)
    return Offline()


def found_ollama(provider: Provider) -> bool:
    """Whether `provider` is the local Ollama found by itself (nothing chosen or set)."""
    return getattr(provider, "base_url", None) == settings.PREVIOUSLY_OLLAMA_URL.rstrip("/")


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


def known_context_tokens(provider: Provider | None = None) -> tuple[bool, int | None]:
    """(True, what `context_tokens` answers) when it would answer without asking the model
    server (set, offline, or asked already), else (False, None): a turn reads it on the event
    loop rather than going to a thread for it (issue 24 point 11)."""
    if settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS:
        return True, settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS
    provider = provider or get_provider()
    base_url = getattr(provider, "base_url", "")
    if provider.offline or not base_url:
        return True, None
    if base_url in _window:
        return True, _window.get(base_url)
    return False, None


def context_tokens(provider: Provider | None = None) -> int | None:
    """The model's context window in tokens: PREVIOUSLY_MODEL_CONTEXT_TOKENS when set, else
    what the server of `provider` (default: the process's) reports (asked once per process),
    else None (unknown)."""
    provider = provider or get_provider()
    known, window = known_context_tokens(provider)
    if known:
        return window
    base_url = provider.base_url
    if base_url not in _window:
        with _window_lock:
            if base_url not in _window:
                _window[base_url] = context_window(base_url, _keys.get(base_url, ""))
                log.info("model context window at %s: %s tokens", base_url, _window[base_url])
    return _window.get(base_url)


def _probe_ollama(timeout: float = 0.5) -> str | None:
    """The first model a local Ollama (PREVIOUSLY_OLLAMA_URL) lists, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"{settings.PREVIOUSLY_OLLAMA_URL.rstrip('/')}/models", timeout=timeout) as response:
            data = json.load(response)
    except (OSError, ValueError):
        return None
    models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]
    return models[0] if models else None


def agent_model(profile=None) -> str:
    """The model name for the Previously Agent: PREVIOUSLY_AGENT_MODEL, else the one chosen on
    the connections page (unless the companion answers through a connection of its own), else
    the companion's chat model, else the provider's."""
    provider = get_provider()
    stored = "" if _own_connection(profile) else _state["agent_model"]
    return settings.PREVIOUSLY_AGENT_MODEL or stored or getattr(profile, "model", "") or provider.model


def _own_connection(profile) -> int | None:
    """The connection a companion's model was picked from (O4) when it is not the default one
    and nothing overrides it (the environment's endpoint, a provider a test installed)."""
    pk = getattr(profile, "model_connection_id", None)
    if not pk or settings.PREVIOUSLY_LLM_BASE_URL or _state["pinned"] or pk == _state["connection"]:
        return None
    return pk


def _connection_provider(pk: int) -> Provider | None:
    """The provider of stored connection `pk` (kept until the stored choices change), or None
    when it is gone or its key cannot be read: the default provider answers then."""
    if pk not in _by_connection:
        try:
            row = _off_the_loop(lambda: Connection.objects.filter(pk=pk).values_list("base_url", "sealed_key").first())
        except Exception:  # noqa: BLE001 - see _stored_choice_changed; asked again next time
            log.warning("model connection %s could not be read", pk, exc_info=True)
            return None
        provider = None
        if row is None:
            log.warning("a companion's model connection (%s) is gone; the default provider answers", pk)
        else:
            try:
                provider = _endpoint(row[0], unseal(row[1]), "default")
            except Unreadable:
                log.error("model connection %s: its API key cannot be read (PREVIOUSLY_CONNECTION_SECRET changed?)", pk)
        _by_connection[pk] = provider
    return _by_connection[pk]


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
    """The provider as this companion's settings tune it (read from `profile` as loaded): the
    connection its model was picked from, its model and temperature."""
    base = get_provider()
    own = _own_connection(profile)
    if own is not None:
        base = _connection_provider(own) or base
    model = getattr(profile, "model", "") or ""
    temperature = getattr(profile, "temperature", None)
    if not model and temperature is None:
        return base
    return Tuned(base, model=model, temperature=temperature)


@dataclass(frozen=True)
class ModelList:
    """The models one endpoint lists, for a companion's settings page (O4). `connection` is the
    stored connection's id, None for the endpoint in use that is no stored connection (the
    environment's, the Ollama found by itself)."""

    label: str
    connection: int | None
    models: tuple[str, ...]  # empty when it lists none or cannot be reached now


def model_lists(*, stored_only: bool = False) -> list[ModelList]:
    """What a companion may pick from: with PREVIOUSLY_LLM_BASE_URL set (it wins), its models;
    else every connection's, and a found Ollama's. `stored_only`: every stored connection's,
    whatever is in use (the connections page's defaults, issue 28 point 3). The lists are asked
    for at once (3 s each at most)."""
    endpoints: list[tuple[str, int | None, str, str]] = []
    if not stored_only:
        provider = get_provider()
        base_url = getattr(provider, "base_url", "")
        if base_url and (settings.PREVIOUSLY_LLM_BASE_URL or _state["pinned"] or found_ollama(provider)):
            label = (gettext("Ollama on this machine") if found_ollama(provider)
                     else gettext("Set in the server's environment"))
            endpoints.append((label, None, base_url, _keys.get(base_url, "")))
    if stored_only or (not settings.PREVIOUSLY_LLM_BASE_URL and not _state["pinned"]):
        for conn in Connection.objects.all():
            try:
                key = unseal(conn.sealed_key)
            except Unreadable:
                key = None  # listed as listing nothing; the connections page asks for the key again
            endpoints.append((str(conn), conn.pk, conn.base_url, key))
    if not endpoints:
        return []
    with ThreadPoolExecutor(max_workers=min(4, len(endpoints))) as pool:
        wait = settings.PREVIOUSLY_MODEL_LIST_SECONDS
        found = list(pool.map(lambda e: list_models(e[2], e[3], wait) if e[3] is not None else None, endpoints))
    return [ModelList(label, pk, tuple(models or ())) for (label, pk, _url, _key), models in zip(endpoints, found, strict=True)]
