"""Database work of the chat socket, run off the event loop (`db_call`), most urgent first.

The calls run on the chat's own database threads (`POOL`), each keeping one connection:
- on SQLite, one thread: SQLite takes one writer at a time, and a writer kept waiting sleeps in
  steps of 1–100 ms, so the chat's calls queue here instead;
- on PostgreSQL, which answers many connections at once, `PREVIOUSLY_DB_THREADS` of them: one
  socket's round trips do not wait behind another's.

Waiting calls run earliest deadline first, not in the order they came (BENCH §4). A call made
for a frame from the page is due when that frame arrived (`frame_arrived`), so under a burst
the turn that came first reaches its first token first, rather than every turn waiting behind
every newer one's next step. A turn's work after its reply has streamed (archiving the reply,
letting go of the lease) is due `LATER_SECONDS` after it is asked for (`after_the_reply`): a
person waiting for a first token goes before it, and no call made more than that time after it
ever does, so it is never starved. Any other call is due when it is made.

A call that is not due yet also waits while any other call runs, even with a thread free: it
starts on an idle pool, or when it falls due. On PostgreSQL the threads run at once and share
the process's GIL, so a reply's archive write running beside a newer turn's steps slowed them;
held back, it runs between bursts. `make loadtest`, two-processes+redis+pg, 4 interleaved
pairs: the server's p99 from frame to first token 148.5 -> 138.4 ms (lower in every pair), the
added first-token delay p99 103.0 -> 93.9 ms, CPU per turn unchanged.
"""

import heapq
import itertools
import os
import threading
import time
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from contextvars import ContextVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection, connections

# How long a turn's work after its streamed reply may wait for others' first tokens (s).
LATER_SECONDS = 0.5

# When this context's calls are due: (the moment they are due from, or None for "when made",
# seconds added). Set per frame by the consumer, and after the reply by the turn.
_due: ContextVar[tuple[float | None, float]] = ContextVar("chat_db_due", default=(None, 0.0))

# How often an idle thread looks whether the process is exiting (s).
EXIT_CHECK_SECONDS = 0.5

_opened = []  # each thread's connection handle, to close them all at the end (tests)


@contextmanager
def frame_arrived():
    """Calls made within (and by the tasks started within) are for a frame that arrived now."""
    token = _due.set((time.monotonic(), 0.0))
    try:
        yield
    finally:
        _due.reset(token)


@contextmanager
def after_the_reply():
    """Calls made within (and by the tasks started within) are a turn's work after its reply
    has streamed: each gives way to first tokens for up to LATER_SECONDS. Left as it was on the
    way out, so a thread that ran the turn through async_to_sync (which copies a coroutine's
    context changes back to its caller: a background reply's task thread) keeps no such mark."""
    token = _due.set((None, LATER_SECONDS))
    try:
        yield
    finally:
        _due.reset(token)


def _deadline() -> float:
    since, added = _due.get()
    return (time.monotonic() if since is None else since) + added


class DueFirstPool(Executor):
    """Up to `size()` threads, started as calls come, running waiting calls earliest deadline
    first (`_deadline`, read in the caller's context as the call is submitted); calls due at the
    same moment run in the order they came, and one not due yet only on an idle pool. Made
    again in a forked child (a test's live server): the parent's threads do not exist there."""

    def __init__(self, size):
        self._size = size
        self._start()
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _start(self) -> None:
        self._ready = threading.Condition()
        self._waiting: list = []  # heap of (deadline, order, future, fn, args, kwargs)
        self._order = itertools.count()
        self._threads = self._idle = self._running = 0

    def _after_fork_in_child(self) -> None:
        self._start()
        _opened.clear()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future = Future()
        with self._ready:
            heapq.heappush(self._waiting, (_deadline(), next(self._order), future, fn, args, kwargs))
            # A thread idles for each waiting call, or the pool grows by one. An idle thread
            # woken for the call before this one (it has not taken it yet), or waiting for a
            # call not due yet, is not this call's: counting it so held a burst's second call
            # behind the first with threads to spare (test_db_pool).
            if self._idle < len(self._waiting) and self._threads < self._size():
                self._threads += 1
                threading.Thread(target=self._work, name=f"chat-db-{self._threads}").start()
            elif self._idle:
                self._ready.notify()
        return future

    def _work(self) -> None:
        _opened.append(connections["default"])
        while True:
            with self._ready:
                self._idle += 1
                while not (self._waiting and self._may_start(self._waiting[0][0])):
                    # Not a daemon thread: as the process exits, a call under way (a reply's
                    # write) and those waiting finish first, as in a ThreadPoolExecutor; the
                    # thread ends once the main thread has and nothing is left to run.
                    timeout = EXIT_CHECK_SECONDS
                    if self._waiting:  # held until it is due, or until the pool is idle
                        timeout = min(timeout, max(self._waiting[0][0] - time.monotonic(), 0.001))
                    if (not self._ready.wait(timeout) and not self._waiting
                            and not threading.main_thread().is_alive()):
                        self._idle -= 1
                        return
                self._idle -= 1
                _, _, future, fn, args, kwargs = heapq.heappop(self._waiting)
                self._running += 1
            try:
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, as an executor does
                    future.set_exception(exc)
                    del exc
                else:
                    future.set_result(result)
                    del result
            finally:
                with self._ready:
                    self._running -= 1
                    if self._waiting:
                        self._ready.notify()  # a call held back while this one ran may start
            del future, fn, args, kwargs

    def _may_start(self, deadline: float) -> bool:
        """A call that is due starts at once; one not due yet (a turn's work after its reply)
        only while no other call runs on the pool."""
        return deadline <= time.monotonic() or not self._running


def _threads() -> int:
    return 1 if connection.vendor == "sqlite" else settings.PREVIOUSLY_DB_THREADS


POOL = DueFirstPool(_threads)


def db_call(func):
    """`func` as a coroutine function run on the chat's database threads (see the module docstring)."""
    return database_sync_to_async(func, thread_sensitive=False, executor=POOL)


def close_connections() -> None:
    """Close the connection each thread keeps, from outside those threads, while no call is
    running (a test run about to drop its database). A later call opens a new one."""
    for handle in _opened:
        handle.inc_thread_sharing()
        try:
            handle.close()
        finally:
            handle.dec_thread_sharing()
