"""memory.postgresql (BENCH §4, issue 24 point 11): a kept connection's health check is a look at
its socket, not a `SELECT 1` round trip, and a connection the server ended is still replaced
before it is used. Against the local PostgreSQL server, whichever database the suite runs on."""

import socket
import time

import dj_database_url
import psycopg
import pytest
from django.db import connections

from memory.postgresql.base import DatabaseWrapper, quiet
from tests.services import skip_or_fail

SERVER = "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def wrapper(django_db_blocker):
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        skip_or_fail("PostgreSQL (127.0.0.1:5432) is needed")
    settings = connections.configure_settings(
        {"default": dj_database_url.parse(SERVER, conn_max_age=600, conn_health_checks=True)}
    )["default"]
    db = DatabaseWrapper(settings, alias="probe")  # a connection of its own, outside the suite's databases
    with django_db_blocker.unblock():
        yield db
        db.close()


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
