"""The chat's database pool (previously/chat/db.py) in a forked process: a test's live server is
forked from a test process whose async chat tests already ran calls on the pool. Functions are
wrapped by `db_call` at import, so the executor they hold must be the child's own pool. With
the parent's, the idle thread the pool counts does not exist in the child: its calls were
queued and never run, and on PostgreSQL + Redis 16 browser tests lost their replies under
`make test` with 2 workers (issue 25 point 4)."""

import os

import pytest

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
