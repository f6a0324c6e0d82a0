"""A child process of the server (previously/child.py) sees the server's database and settings,
but maps none of an SQLite database into its memory (issue 24 point 6, S4)."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

from previously import child

MAPPED = ("import django; django.setup(); from django.db import connection; c = connection.cursor();"
          " c.execute('PRAGMA mmap_size'); print(c.fetchone()[0])")


def _mapped_bytes(env: dict) -> int:
    done = subprocess.run([sys.executable, "-c", MAPPED], env=env, cwd=settings.BASE_DIR, capture_output=True,
                          text=True, timeout=120, check=True)
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's map of its file")
def test_the_server_maps_its_sqlite_database_and_a_child_maps_none(tmp_path):
    """A child streams an import: a map of the database file counted each page it wrote in its
    resident memory (211 MB of a 1M-record apply's 307 MB), for no speed. (Asked of a scratch
    database: the test database is this worker's.)"""
    scratch = f"sqlite:///{tmp_path / 'scratch.sqlite3'}"
    server = {k: v for k, v in os.environ.items() if k != "PREVIOUSLY_SQLITE_MMAP_BYTES"}
    server.update(DATABASE_URL=scratch, DJANGO_SETTINGS_MODULE="previously.settings", PREVIOUSLY_VAR_DIR=str(tmp_path))
    assert _mapped_bytes(server) == settings.PREVIOUSLY_SQLITE_MMAP_BYTES == 1024 ** 3
    assert _mapped_bytes({**child.environment(), "DATABASE_URL": scratch, "PREVIOUSLY_VAR_DIR": str(tmp_path)}) == 0
    assert "PREVIOUSLY_SQLITE_MMAP_BYTES" not in child.CARRIED  # not set back to the server's once started


def test_a_child_sets_django_up_without_the_web_server(tmp_path):
    """Setting Django up (a child, the task worker, any management command) imports none of
    Daphne's server, Twisted or autobahn: only `python -m previously.server` serves. With the
    "daphne" app installed every such process carried them: 27 of a child's 97 MB resident
    (issue 24 point 6)."""
    code = "import sys, django; django.setup(); print(sorted({m.split('.')[0] for m in sys.modules} & {'daphne', 'twisted', 'autobahn'}))"
    env = {**child.environment(), "DATABASE_URL": f"sqlite:///{tmp_path / 'scratch.sqlite3'}", "PREVIOUSLY_VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=settings.BASE_DIR, capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
