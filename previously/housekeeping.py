"""The server process's periodic housekeeping (S1): close idle slices every minute (and remove
import previews older than PREVIOUSLY_IMPORT_PREVIEW_HOURS, S4; and give up to
PREVIOUSLY_EMBED_BACKFILL_LINES archived lines their sentence vectors, R8: after an import or
a change of model — in the environment, or on the connections page — the backfill runs by itself, as `manage.py embed_backfill` does by hand; take
the daily backup, O6); every
PREVIOUSLY_PROACTIVE_CHECK_SECONDS, queue the proactive check (K15: due Horizon items).

Started once per process by the ASGI application on its first connection (never by
management commands or tests); `manage.py close_idle_slices` does the same by hand.
"""

import logging
import threading
import time
from importlib import import_module

from django.conf import settings
from django.db import close_old_connections, connections
from django.template.loader import get_template
from django.urls import get_resolver

from memory import backups
from memory.interop.previews import sweep_previews
from memory.recall import embedding, vectors
from previously.agent.lifecycle import close_idle_slices, fail_stale_runs
from previously.chat.proactive import proactive_check
from previously.llm.select import context_tokens, follow_stored_choice

log = logging.getLogger(__name__)
_started = threading.Event()
_lock = threading.Lock()


def start_idle_check() -> bool:
    """Start the housekeeping loop once per process; False when off or already running."""
    period = settings.PREVIOUSLY_IDLE_CHECK_SECONDS
    proactive = settings.PREVIOUSLY_PROACTIVE_CHECK_SECONDS
    if (period <= 0 and proactive <= 0) or _started.is_set():
        return False
    with _lock:
        if _started.is_set():
            return False
        _started.set()
    threading.Thread(target=_loop, args=(period, proactive), name="previously-idle-check", daemon=True).start()
    return True


def run_idle_check() -> int:
    """One pass: close idle slices (each queues its evolution run), fail runs a dead process left."""
    closed = close_idle_slices()
    failed = fail_stale_runs()
    if closed or failed:
        log.info("idle check: closed %d slice(s), marked %d stale run(s) failed", len(closed), failed)
    swept = sweep_previews()  # S4: import previews never applied nor cancelled
    if swept:
        log.info("idle check: removed %d expired import preview(s)", swept)
    follow_stored_choice()  # embeddings chosen on the connections page: a change re-embeds here
    per_pass = settings.PREVIOUSLY_EMBED_BACKFILL_LINES
    try:
        embedded = vectors.backfill(limit=per_pass) if per_pass > 0 and vectors.behind() else 0
    except Exception as exc:  # noqa: BLE001 - an unreachable embedding server: lexical meanwhile, retried next pass
        log.warning("idle check: embedding archived lines failed (%s); recall stays lexical for them", exc)
        embedded = 0
    if embedded:
        log.info("idle check: embedded %d archived line(s)", embedded)
    take_scheduled_backup()
    return len(closed)


def take_scheduled_backup() -> backups.Backup | None:
    """O6: a backup every PREVIOUSLY_BACKUP_HOURS (daily by default), then the old ones pruned."""
    if not backups.due():
        return None
    try:
        backup = backups.make_backup()
    except backups.BackupError as error:
        log.warning("scheduled backup failed: %s", error)
        return None
    removed = backups.prune()
    log.info("backup %s (%d bytes); removed %d old one(s)", backup.path.name, backup.bytes, len(removed))
    return backup


def run_proactive_check() -> None:
    """Queue one proactive pass (a task: model calls stay off this loop)."""
    proactive_check.enqueue()


def _loop(period: int, proactive: int = 0) -> None:
    stop = threading.Event()
    tick = min(p for p in (period, proactive) if p > 0)
    due = {"idle": time.monotonic() + period, "proactive": time.monotonic() + proactive}
    jobs = [("idle", period, run_idle_check), ("proactive", proactive, run_proactive_check)]
    while not stop.wait(tick):
        close_old_connections()
        try:
            for name, every, job in jobs:
                if every > 0 and time.monotonic() >= due[name]:
                    due[name] = time.monotonic() + every
                    try:
                        job()
                    except Exception:  # noqa: BLE001 - the next pass retries; the server keeps serving
                        log.exception("%s check failed", name)
        finally:
            connections.close_all()


# The templates a turn and an evolution run render first (compiled once, with their tag libraries
# imported): done at start, not by the first turn, nor by a task thread holding the import lock
# while a turn waits for it.
WARM_TEMPLATES = ("chat/chat.html", "card/evolution.html")
# What the first streamed reply imported, on the event loop, while every socket waited: httpx's
# asyncio backend (≈8 ms on the 2-core machine), which anyio loads lazily, so by module name.
# (The SDK's chat resources were here too until the request skipped them: openai_compat.)
WARM_MODULES = ("anyio._backends._asyncio",)


def warm_up() -> threading.Thread:
    """What the first turn after a start would otherwise pay for, done as the server process
    starts (issue 24 point 11, BENCH §4): the in-process sentence-embedding model (≈2 s), the
    chat's and the evolution indicator's templates, the URLconf with every page's views (the
    first request imported them, ≈25 ms), what a streamed reply imports, and (in a
    thread, returned, so a model server that is slow or not up yet never holds the start) the
    model's context window, which the first turn asked the model server for (two requests, up
    to 3 s each). The server freezes what this loaded out of the collector's passes."""
    asking = threading.Thread(target=_ask_context_window, name="previously-model-window", daemon=True)
    asking.start()
    began = time.perf_counter()
    if embedding.preload():
        log.info("embedding model loaded in %.1f s", time.perf_counter() - began)
    for name in WARM_TEMPLATES:
        get_template(name)
    get_resolver().url_patterns  # noqa: B018 - reading the property imports the URLconf
    for name in WARM_MODULES:
        try:
            import_module(name)
        except ImportError:  # moved by an upgrade: the first reply loads what it needs, as before
            log.warning("warm-up: %s is gone; the first reply imports what it needs", name)
    return asking


def _ask_context_window() -> None:
    try:
        context_tokens()
    except Exception:  # noqa: BLE001 - the first turn asks again; the server starts regardless
        log.warning("asking the model server for its context window failed", exc_info=True)
    finally:
        connections.close_all()  # the provider's choice may read the stored connections


class StartsHousekeeping:
    """ASGI wrapper: the first connection to this server process starts the idle check;
    `warm_up` is called by the server (previously.server) before it listens."""

    def __init__(self, app):
        self.app = app

    def warm_up(self) -> threading.Thread:
        return warm_up()

    async def __call__(self, scope, receive, send):
        if not _started.is_set():
            start_idle_check()
        return await self.app(scope, receive, send)
