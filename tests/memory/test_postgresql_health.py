"""memory.postgresql (BENCH §4, issue 24 point 11): a kept connection's health check is a look at
its socket, not a `SELECT 1` round trip, and a connection the server ended is still replaced
before it is used; a connection that prepares statements plans each run for its own values.
Against the local PostgreSQL server, whichever database the suite runs on."""

import json
import os
import socket
import subprocess
import sys
import time

import dj_database_url
import psycopg
import pytest
from django.db import connections

from memory.postgresql.base import DatabaseWrapper, quiet
from tests.services import skip_or_fail

SERVER = "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def make_wrapper(django_db_blocker):
    """A connection of its own (with these OPTIONS), outside the suite's databases."""
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        skip_or_fail("PostgreSQL (127.0.0.1:5432) is needed")
    made = []

    def make(**options):
        settings = dj_database_url.parse(SERVER, conn_max_age=600, conn_health_checks=True)
        settings["OPTIONS"] = options
        made.append(DatabaseWrapper(connections.configure_settings({"default": settings})["default"], alias="probe"))
        return made[-1]

    with django_db_blocker.unblock():
        yield make
        for db in made:
            db.close()


@pytest.fixture
def wrapper(make_wrapper):
    return make_wrapper()


def _backend_pid(db) -> int:
    with db.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_kept_idle_connection_is_used_without_a_select_1(wrapper, monkeypatch):
    pid = _backend_pid(wrapper)
    checks = []
    monkeypatch.setattr(wrapper, "is_usable", lambda: checks.append("SELECT 1") or True)
    for _ in range(3):
        wrapper.close_if_unusable_or_obsolete()  # what each request and each chat database call starts with
        assert _backend_pid(wrapper) == pid
    assert checks == []


def test_a_connection_the_server_ended_is_noticed_and_replaced_before_use(wrapper):
    pid = _backend_pid(wrapper)
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while quiet(wrapper.connection) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not quiet(wrapper.connection)  # the server's notice (or close) is on the socket
    wrapper.close_if_unusable_or_obsolete()
    assert _backend_pid(wrapper) != pid  # Django's own check ran, closed it, and a new one answered


def test_only_an_open_idle_connection_counts_as_quiet(wrapper):
    _backend_pid(wrapper)
    wrapper.connection.autocommit = False
    wrapper.connection.execute("SELECT 1")  # a transaction is open
    assert not quiet(wrapper.connection)
    wrapper.connection.rollback()
    assert quiet(wrapper.connection)
    wrapper.connection.close()
    assert not quiet(wrapper.connection)


def test_the_app_s_postgresql_connections_use_this_engine():
    if connections["default"].vendor != "postgresql":
        pytest.skip("the suite runs on SQLite")
    assert isinstance(connections["default"], DatabaseWrapper)


def _plans(db, text: str) -> tuple[int, int]:
    """(generic, custom) plans PostgreSQL made so far for this connection's prepared `text`."""
    with db.cursor() as cursor:
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s", [text])
        row = cursor.fetchone()
    assert row is not None, f"not prepared: {text}"
    return row


def test_a_prepared_statement_is_planned_for_its_own_values_every_run(make_wrapper):
    db = make_wrapper(server_side_binding=True, prepare_threshold=2)
    text = "SELECT count(*) FROM pg_class WHERE relpages > $1"
    with db.cursor() as cursor:
        for pages in range(12):
            cursor.execute("SELECT count(*) FROM pg_class WHERE relpages > %s", [pages])
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_custom_plan"
    generic, custom = _plans(db, text)
    # PostgreSQL's own choice (auto) switches to one generic plan after five custom ones.
    assert (generic, custom) == (0, 10)  # prepared on the 2nd run, planned on each of the next 10


def test_without_server_side_binding_nothing_is_prepared_or_changed(wrapper):
    with wrapper.cursor() as cursor:
        for pages in range(8):
            cursor.execute("SELECT count(*) FROM pg_class WHERE relpages > %s", [pages])
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        assert cursor.fetchone()[0] == 0
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "auto"


def _database_options(**env) -> dict:
    """settings.DATABASES' OPTIONS for a PostgreSQL DATABASE_URL in a fresh process with `env`."""
    code = "import django, json; django.setup(); from django.conf import settings; print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {})))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "previously.settings", "DATABASE_URL": SERVER, **env},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_postgresql_statements_are_prepared_unless_the_setting_says_0():
    assert _database_options(PREVIOUSLY_PG_PREPARE_THRESHOLD="") == {"server_side_binding": True, "prepare_threshold": 5}
    assert _database_options(PREVIOUSLY_PG_PREPARE_THRESHOLD="3") == {"server_side_binding": True, "prepare_threshold": 3}
    assert _database_options(PREVIOUSLY_PG_PREPARE_THRESHOLD="0") == {}  # Django's client-side binding (a pooler)
