"""Writers waiting for SQLite's one write lock, seen by a bulk writer across threads and processes
(S4, BENCH §5; issue 24 point 6).

A writer kept waiting sleeps in SQLite's busy handler, invisible to everyone else: an import
between two of its batches could only guess, leaving the lock free for a fixed gap after each
batch whether anyone waited or not (a fifth of a lone import's time was that sleep), and a
waiter the CPU did not wake in time missed the gap. Here every statement that may wait for the
lock (a BEGIN IMMEDIATE, or a write outside a transaction) holds a shared `flock` on a file
beside the database while it waits; a bulk writer between its batches asks whether any is held
(`someone_waits`) and gives way while one is (`give_way`). A transaction's writer holds the
flock only while its BEGIN waits, never while it writes; a write in autocommit, for its one
statement.

A person's turn writes three times within a tenth of a second or so (the lease, their line, the
reply). Marked only while each statement waits, the second and third found the next batch begun
already, and the turn waited for a whole batch more than once; `WritesComing` marks the whole
turn instead, from before its first write to its last, so an import gives way to it once and the
turn's later writes find the lock free (BENCH §5)."""

import fcntl
import os
import threading
import time
from contextlib import contextmanager

from django.db import connections

GIVE_WAY_MOST = 0.25  # s: a bulk writer waits at most this long between two batches (it must progress)
GIVE_WAY_POLL = 0.001  # s between two looks


class Waiting:
    """One connection's view of the waiting writers of the SQLite database at `path`: a file of
    its own open on `path` + "-writers" (flocks are per open file), closed with the connection."""

    def __init__(self, database: str):
        self.path = f"{os.path.abspath(database)}-writers"
        self._fd: int | None = None
        self._pid = 0

    @classmethod
    def of(cls, database: str) -> "Waiting | None":
        """For the SQLite file `database`; None for an in-memory database (no one else sees it)."""
        if not database or database == ":memory:" or database.startswith("file:") or "mode=memory" in database:
            return None
        return cls(database)

    def _file(self) -> int:
        if self._fd is None or self._pid != os.getpid():  # a forked child opens its own
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._pid = os.getpid()
        return self._fd

    def close(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None

    @contextmanager
    def wait(self):
        """Around a statement that may wait for the write lock."""
        fd = self._file()
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def someone_waits(self) -> bool:
        fd = self._file()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def give_way(self, most: float = GIVE_WAY_MOST) -> float:
        """Wait while another writer waits for the lock (at most `most` seconds); the time waited."""
        began = time.monotonic()
        while self.someone_waits() and time.monotonic() - began < most:
            time.sleep(GIVE_WAY_POLL)
        return time.monotonic() - began


class _Coming:
    """This process's turns under way against one database file: one shared flock on the file
    of waiting writers, held while any of them is (a count, as turns overlap)."""

    def __init__(self, path: str):
        self.path, self.count, self.fd, self.guard = path, 0, None, threading.Lock()

    def enter(self) -> None:
        with self.guard:
            if self.count == 0:
                if self.fd is None:
                    self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                fcntl.flock(self.fd, fcntl.LOCK_SH)
            self.count += 1

    def leave(self) -> None:
        with self.guard:
            self.count -= 1
            if self.count == 0:
                fcntl.flock(self.fd, fcntl.LOCK_UN)


_coming: dict[tuple[int, str], _Coming] = {}
_coming_guard = threading.Lock()


class WritesComing:
    """Work that will write several times in quick succession for a waiting person (a chat turn),
    announced from `start()` to `end()`: a bulk writer between two batches gives way until it ends
    (`give_way`, at most GIVE_WAY_MOST each time). `paused()` around a stretch with no writes (the
    model's stream: seconds, while an import would wait at every part). Nothing on another engine,
    or on an in-memory database. Also a context manager (start, end)."""

    def __init__(self, alias: str = "default"):
        conn = connections[alias]
        waiting = Waiting.of(str(conn.settings_dict.get("NAME") or "")) if conn.vendor == "sqlite" else None
        self._coming, self._on = None, False
        if waiting is not None:
            with _coming_guard:  # per process: a forked child (a test's live server) opens its own
                self._coming = _coming.setdefault((os.getpid(), waiting.path), _Coming(waiting.path))

    def start(self) -> None:
        if self._coming is not None and not self._on:
            self._coming.enter()
            self._on = True

    def end(self) -> None:
        if self._on:
            self._on = False
            self._coming.leave()

    @contextmanager
    def paused(self):
        was = self._on
        self.end()
        try:
            yield
        finally:
            if was:
                self.start()

    def __enter__(self) -> "WritesComing":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.end()
