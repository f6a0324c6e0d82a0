"""S4, BENCH §5: a writer kept waiting for SQLite's write lock is seen by an import between two
of its batches, which gives way to it, and pauses for no one when no one waits
(memory/sqlite/waiting.py, memory.interop.bulk_insert.leave_the_lock)."""

import sqlite3
import threading
import time

import pytest
from django.db import connection, connections, transaction

from memory.interop import bulk_insert
from memory.models import Profile
from memory.sqlite import waiting as waiting_module
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sqlite_file():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's one write lock (PostgreSQL writers do not queue on one lock)")
    connection.ensure_connection()
    if connection.waiting is None:
        pytest.skip("an in-memory database: no other connection can wait for it")
    return connection.settings_dict["NAME"]


def _writer_in_a_thread(profile_id: int) -> tuple[threading.Thread, threading.Event]:
    """Another person's write (autocommit, as the chat's lease is taken) on a connection of its own."""
    done = threading.Event()

    def write():
        try:
            Profile.objects.filter(pk=profile_id).update(name="等一下 waiting 🙂")
            done.set()
        finally:
            connections.close_all()

    return threading.Thread(target=write), done


def _until(condition, seconds: float = 10) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.001)
    return False


def test_a_writer_waiting_for_the_lock_is_seen_and_the_import_gives_way_until_it_got_in(sqlite_file):
    profile = ProfileFactory()
    holder = sqlite3.connect(sqlite_file, timeout=20, isolation_level=None)  # the import's batch
    holder.execute("BEGIN IMMEDIATE")
    thread, done = _writer_in_a_thread(profile.pk)
    thread.start()
    try:
        assert _until(connection.waiting.someone_waits), "the waiting writer is not seen"
        assert not done.is_set()
        holder.execute("COMMIT")  # the batch ends
        bulk_insert.leave_the_lock()
        assert done.is_set()  # it gave way until the other write was in
        assert not connection.waiting.someone_waits()
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
        thread.join(20)
    assert Profile.objects.get(pk=profile.pk).name == "等一下 waiting 🙂"


def test_no_one_waiting_no_pause(sqlite_file, monkeypatch):
    """A lone import no longer sleeps between its batches (it slept a fixed gap after each)."""
    slept = []
    monkeypatch.setattr(waiting_module.time, "sleep", slept.append)
    ProfileFactory()  # writes of this connection's own leave nothing marked
    bulk_insert.leave_the_lock()
    assert slept == []
    assert not connection.waiting.someone_waits()


def test_reads_and_writes_inside_a_transaction_are_not_marked(sqlite_file, monkeypatch):
    marked = []
    real = waiting_module.Waiting.wait

    def wait(self):
        marked.append(True)
        return real(self)

    monkeypatch.setattr(waiting_module.Waiting, "wait", wait)
    Profile.objects.count()
    assert marked == []
    with transaction.atomic():
        ProfileFactory()
    assert marked == [True]  # its BEGIN IMMEDIATE only
