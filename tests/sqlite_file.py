"""The bytes of an SQLite database file and its WAL, as stored on disk, read by another process.

Read here, they would be opened and closed by the process that holds a connection to the same
file, and closing any descriptor of a file drops every POSIX lock the process holds on it
(fcntl's rule, https://www.sqlite.org/howtocorrupt.html section 2.2): SQLite's shared lock with
it. A live server's last connection then took itself for the last one, checkpointed and removed
the WAL under this process's connection, whose every statement after said "disk I/O error" (a
whole worker's browser tests failed so in a full run)."""

import subprocess
from pathlib import Path


def database_bytes(path: str | Path) -> bytes:
    """The database file's bytes and its WAL's, if there is one."""
    files = [str(p) for p in (Path(path), Path(f"{path}-wal")) if p.exists()]
    return subprocess.run(["cat", *files], capture_output=True, check=True, timeout=60).stdout
