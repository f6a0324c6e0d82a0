"""The chat's database pool (previously/chat/db.py) in a forked process: a test's live server is
forked from a test process whose async chat tests already ran calls on the pool. Functions are
wrapped by `db_call` at import, so the executor they hold must be the child's own pool. With
the parent's, the idle thread the pool counts does not exist in the child: its calls were
queued and never run, and on PostgreSQL + Redis 16 browser tests lost their replies under
`make test` with 2 workers (issue 25 point 4)."""

import contextvars
import os
import subprocess
import sys
import threading
import time

import pytest
from django.conf import settings

from previously.chat import db


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_runs_the_pool_calls_on_threads_of_its_own():
    held = db.POOL  # what db_call handed to every wrapped function, at import
    assert held.submit(lambda: "parent").result(timeout=5) == "parent"  # a thread now idles in it
    pid = os.fork()
    if pid == 0:  # the child: answer through the exit code, never through pytest
        try:
            ran = held.submit(lambda: "child").result(timeout=5) == "child"
        except BaseException:  # noqa: BLE001 - a timeout is the failure this test looks for
            ran = False
        os._exit(0 if ran else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's call on the pool never ran"
    assert held.submit(lambda: "parent again").result(timeout=5) == "parent again"



def _blocked(pool: db.DueFirstPool, size: int):
    """`size` calls holding every thread of `pool` until the returned event is set."""
    release, started = threading.Event(), threading.Barrier(size + 1)

    def hold():
        started.wait(5)
        release.wait(5)

    held = [pool.submit(hold) for _ in range(size)]
    started.wait(5)
    return release, held


def _frame_context() -> contextvars.Context:
    """The context of a turn begun by a frame arriving now (the consumer's `receive`)."""
    def inside():
        with db.frame_arrived():
            return contextvars.copy_context()
    return contextvars.copy_context().run(inside)


def _after_reply_context() -> contextvars.Context:
    """The context of a turn whose reply has streamed (`reply_to`)."""
    def inside():
        with db.after_the_reply():
            return contextvars.copy_context()
    return contextvars.copy_context().run(inside)


def test_waiting_calls_run_earliest_deadline_first_not_in_the_order_they_came(monkeypatch):
    """BENCH §4: under a burst, the turn that came first reaches its first token first. A frame's
    calls are due when the frame arrived, so the next step of an older turn goes before the first
    step of a newer one, and a call made outside any frame is due when it is made; a turn's work
    after its reply has streamed gives way to them all for a while. (In the order they came, the
    bookkeeping would run first and the older turn third.)"""
    monkeypatch.setattr(db, "LATER_SECONDS", 60.0)  # however slowly this test runs
    pool = db.DueFirstPool(lambda: 1)
    release, held = _blocked(pool, 1)
    older = _frame_context()
    time.sleep(0.005)
    newer = _frame_context()
    replied = _after_reply_context()
    ran = []
    futures = [
        replied.run(pool.submit, ran.append, "bookkeeping"),
        newer.run(pool.submit, ran.append, "newer turn, first step"),
        older.run(pool.submit, ran.append, "older turn, next step"),
        pool.submit(ran.append, "made now"),
    ]
    release.set()
    for future in [*held, *futures]:
        future.result(timeout=5)
    assert ran == ["older turn, next step", "newer turn, first step", "made now", "bookkeeping"]


def test_work_after_a_reply_gives_way_no_longer_than_its_allowance(monkeypatch):
    """Nothing starves: once the bookkeeping's deadline has passed, it goes before a frame that
    arrives later."""
    monkeypatch.setattr(db, "LATER_SECONDS", 0.05)
    pool = db.DueFirstPool(lambda: 1)
    release, held = _blocked(pool, 1)
    ran = []
    late = _after_reply_context().run(pool.submit, ran.append, "bookkeeping")
    time.sleep(0.1)
    new = _frame_context().run(pool.submit, ran.append, "a new frame")
    release.set()
    for future in [*held, late, new]:
        future.result(timeout=5)
    assert ran == ["bookkeeping", "a new frame"]


def test_work_after_a_reply_waits_while_another_call_runs_even_with_a_thread_free(monkeypatch):
    """BENCH §4: on PostgreSQL the threads share the GIL, so a reply's archive write running
    beside a newer turn's steps slowed them. Not due yet, it waits for the pool to be idle,
    though a second thread is free; a call that is due takes that thread at once."""
    monkeypatch.setattr(db, "LATER_SECONDS", 60.0)
    pool = db.DueFirstPool(lambda: 2)
    release, held = _blocked(pool, 1)
    ran = []
    late = _after_reply_context().run(pool.submit, ran.append, "bookkeeping")
    due = _frame_context().run(pool.submit, ran.append, "a new frame")
    due.result(timeout=5)
    time.sleep(0.1)
    assert ran == ["a new frame"]  # the bookkeeping still waits: the held call runs
    release.set()
    for future in [*held, late]:
        future.result(timeout=5)
    assert ran == ["a new frame", "bookkeeping"]


def test_work_after_a_reply_starts_when_due_though_another_call_still_runs(monkeypatch):
    """Held back no longer than its allowance: at its deadline it starts beside a call that is
    still running."""
    monkeypatch.setattr(db, "LATER_SECONDS", 0.05)
    pool = db.DueFirstPool(lambda: 2)
    release, held = _blocked(pool, 1)
    late = _after_reply_context().run(pool.submit, lambda: "bookkeeping")
    try:
        assert late.result(timeout=5) == "bookkeeping"
        assert not held[0].done()
    finally:
        release.set()
    held[0].result(timeout=5)


def test_a_call_that_raises_hands_its_error_to_the_caller_and_the_thread_goes_on():
    pool = db.DueFirstPool(lambda: 1)

    def refuses():
        raise ValueError("the record p1/c_01 is refused")

    with pytest.raises(ValueError, match="p1/c_01"):
        pool.submit(refuses).result(timeout=5)
    assert pool.submit(lambda: "still here").result(timeout=5) == "still here"


def test_threads_start_as_calls_wait_up_to_the_pools_size():
    """Three calls at once get three threads of a pool of three (PostgreSQL's
    PREVIOUSLY_DB_THREADS); no more are ever made."""
    pool = db.DueFirstPool(lambda: 3)
    release, held = _blocked(pool, 3)  # would time out at the barrier with fewer threads
    release.set()
    seen = set()
    for future in [*held, *[pool.submit(lambda: seen.add(threading.current_thread().name)) for _ in range(30)]]:
        future.result(timeout=5)
    assert seen <= {"chat-db-1", "chat-db-2", "chat-db-3"}


def _all_at_once(submit, calls: int) -> list:
    """`calls` calls made by `submit(fn)` that end only once all of them run at the same time
    (each would time out at the barrier otherwise), and the futures of them."""
    together = threading.Barrier(calls)
    return [submit(lambda: together.wait(3)) for _ in range(calls)]


def test_a_burst_gets_a_thread_a_call_while_the_pool_may_grow():
    """BENCH §4: two frames' calls back to back, one thread idle and room for another: both run
    at once. The idle thread was counted for each, so the second waited for the first to end."""
    pool = db.DueFirstPool(lambda: 2)
    pool.submit(lambda: None).result(timeout=5)
    time.sleep(0.05)  # its thread idles
    for future in _all_at_once(pool.submit, 2):
        future.result(timeout=5)


def test_calls_held_until_due_are_not_left_one_thread_short(monkeypatch):
    """A thread idling for a call not due yet is that call's: one more such call gets a thread
    of its own, and once due they run side by side."""
    monkeypatch.setattr(db, "LATER_SECONDS", 0.05)
    pool = db.DueFirstPool(lambda: 3)

    def submit(fn):
        future = _after_reply_context().run(pool.submit, fn)
        time.sleep(0.02)  # the call's thread is idle, waiting for it to fall due, as the next comes
        return future

    for future in _all_at_once(submit, 3):
        future.result(timeout=5)


def test_a_call_under_way_as_the_process_exits_finishes_first(tmp_path):
    """Nothing lost at a stop: the threads are not daemons, so a reply's write that is running
    (or waiting) when the main thread ends is finished before the process exits, as with the
    ThreadPoolExecutor the pool replaced; an idle pool does not hold the exit."""
    done = tmp_path / "written"
    script = (
        "import threading, time\n"
        "from previously.chat.db import DueFirstPool\n"
        "pool = DueFirstPool(lambda: 1)\n"
        "started = threading.Event()\n"
        "def write():\n"
        "    started.set(); time.sleep(0.3)\n"
        f"    open({str(done)!r}, 'w').write('the reply')\n"
        "pool.submit(write)\n"
        "started.wait(5)\n"
    )
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30, cwd=settings.BASE_DIR)
    assert done.read_text() == "the reply"
    assert time.monotonic() - began < 20
