"""A lock file that says a server process is running (SPEC O6: no restore under a live server).

Every server process (`previously.server`, which `make run` and `make scale` start) holds
`var/server.lock` shared for its whole life; `manage.py restore` takes it exclusively, without
waiting, so it refuses while any server runs. The kernel drops a dead process's lock by itself.
"""

import fcntl
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings


class ServerRunning(Exception):
    """A server process holds the lock."""


def _path() -> Path:
    return Path(settings.VAR_DIR) / "server.lock"


def hold():
    """Hold the lock shared for as long as the returned file stays open (the process's life)."""
    handle = open(_path(), "a")  # noqa: SIM115 - kept open on purpose
    fcntl.flock(handle, fcntl.LOCK_SH)
    return handle


@contextmanager
def none_running():
    """Hold the lock exclusively for the block; ServerRunning when a server process holds it."""
    with open(_path(), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            raise ServerRunning(str(_path())) from error
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
