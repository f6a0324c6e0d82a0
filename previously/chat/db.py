"""Database work of the chat socket, run off the event loop (`db_call`).

SQLite takes one writer at a time, and a writer kept waiting sleeps in steps of 1–100 ms:
its calls queue on Channels' one database thread instead (thread-sensitive, as
`database_sync_to_async` does by default). A database server (PostgreSQL) answers many
connections at once, so there the calls of different sockets run side by side on a small
pool of threads, each with its own persistent connection: one socket's round trips no longer
wait behind another's (BENCH §4). `PREVIOUSLY_DB_THREADS` sizes the pool.
"""

import os
from concurrent.futures import Executor, ThreadPoolExecutor

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection, connections

_opened = []  # each pool thread's connection handle, to close them all at the end (tests)


def _remember_connection() -> None:
    _opened.append(connections["default"])


def _new_pool() -> ThreadPoolExecutor:
    # Threads start only when used: on SQLite this pool stays empty.
    return ThreadPoolExecutor(
        max_workers=settings.PREVIOUSLY_DB_THREADS, thread_name_prefix="chat-db", initializer=_remember_connection
    )


class _ThisProcessPool(Executor):
    """The pool of the process making the call, looked up at each call. `db_call` wraps functions
    at import, so the executor it hands over outlives a fork: a forked process (a test's live
    server) keeps none of the parent's pool threads while the pool's idle count says they wait,
    and the parent's pool object would take its calls and never run them."""

    def __init__(self):
        self._pool = _new_pool()
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        self._pool = _new_pool()
        _opened.clear()

    def submit(self, fn, /, *args, **kwargs):
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait=True, *, cancel_futures=False):
        self._pool.shutdown(wait, cancel_futures=cancel_futures)


POOL = _ThisProcessPool()


def db_call(func):
    """`func` as a coroutine function run in a database thread (see the module docstring)."""
    if connection.vendor == "sqlite":
        return database_sync_to_async(func)
    return database_sync_to_async(func, thread_sensitive=False, executor=POOL)


def close_connections() -> None:
    """Close the connection each pool thread keeps, from outside those threads, while no call is
    running (a test run about to drop its database). A later call opens a new one."""
    for handle in _opened:
        handle.inc_thread_sharing()
        try:
            handle.close()
        finally:
            handle.dec_thread_sharing()
