"""S4, BENCH §5: a writer kept waiting for SQLite's write lock, or a person's turn under way, is
seen by an import before each of its batches, which gives way to it, and pauses for no one when
no one waits (memory/sqlite/waiting.py, memory.interop.bulk_insert.leave_the_lock)."""

import sqlite3
import threading
import time

import pytest
from django.core.files.storage import default_storage
from django.db import connection, connections, transaction

from memory.interop import bulk_insert
from memory.interop.history import HistoryImport, apply
from memory.interop.history import write as history_write
from memory.models import Message, Profile
from memory.sqlite import waiting as waiting_module
from memory.sqlite.waiting import WritesComing
from tests.factories import ProfileFactory
from tests.memory.history import samples

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


def test_a_turn_under_way_is_seen_until_the_last_of_overlapping_turns_ends(sqlite_file):
    """A chat turn marks itself from its first write to its last (WritesComing), not only while
    each statement waits: its second and third writes found the next batch begun already."""
    assert not connection.waiting.someone_waits()
    first, second = WritesComing(), WritesComing()
    first.__enter__()
    assert connection.waiting.someone_waits()
    second.__enter__()
    first.__exit__(None, None, None)
    assert connection.waiting.someone_waits()  # the other turn still runs
    second.__exit__(None, None, None)
    assert not connection.waiting.someone_waits()


def test_a_turn_begun_while_a_batch_is_made_goes_before_that_batch(sqlite_file, tmp_path, user, profile, settings, monkeypatch):
    """The import gives way just before each batch takes the lock, not after the one before: a
    person whose turn began while the batch's rows were made (most of a batch's time, outside the
    lock) waited for the whole batch."""
    settings.PREVIOUSLY_HISTORY_BATCH_ROWS = 2
    path = samples.chatgpt_zip(tmp_path / "e.zip", [samples.chatgpt_conversation(cid="c-1", t0=samples.T0)])
    events = []
    real_rows, real_write = history_write._Writer._rows, history_write._Writer._write

    def rows(self, batch, attachments):
        made = real_rows(self, batch, attachments)
        if not events:  # the first batch: another person's turn begins while it is made
            turn = WritesComing()
            turn.__enter__()
            events.append("turn began")

            def end():
                events.append("turn ended")
                turn.__exit__(None, None, None)

            threading.Timer(0.1, end).start()
        return made

    def write(self, *args):
        events.append(f"batch, {Message.objects.filter(profile=profile).count()} lines in")
        return real_write(self, *args)

    monkeypatch.setattr(history_write._Writer, "_rows", rows)
    monkeypatch.setattr(history_write._Writer, "_write", write)
    with HistoryImport(path, user=user) as imp:
        apply(imp)
    assert events[:3] == ["turn began", "turn ended", "batch, 0 lines in"]
    assert not connection.waiting.someone_waits()


def test_a_batch_commits_after_the_part_in_hand_when_someone_begins_to_wait(sqlite_file, monkeypatch):
    """write_in_steps: a person who begins to wait during a batch waits for one part of it, not the
    whole batch; alone, the batch is one transaction."""
    monkeypatch.setattr(bulk_insert, "STEP_ROWS", 2)
    events = []
    turn = WritesComing()

    def write(part):
        events.append(f"part {part}")
        transaction.on_commit(lambda: events.append(f"committed {part}"))
        if part == "ab" and turn_begins:  # another person's turn begins while the first part is written
            turn.__enter__()
            threading.Timer(0.05, lambda: (events.append("turn ended"), turn.__exit__(None, None, None))).start()

    turn_begins = False
    bulk_insert.write_in_steps("abcde", write)
    assert events == ["part ab", "part cd", "part e", "committed ab", "committed cd", "committed e"]
    events.clear()
    turn_begins = True
    bulk_insert.write_in_steps("abcde", write)
    assert events == ["part ab", "committed ab", "turn ended", "part cd", "part e", "committed cd", "committed e"]


def test_a_part_that_fails_keeps_the_committed_parts_and_their_images_and_removes_its_own(
        sqlite_file, tmp_path, user, profile, monkeypatch, media_in_tmp):
    """A history import's batch written in parts (someone waiting after each): a failure keeps
    what was committed, and no image file is left behind for a line that was not (A7, S4)."""
    monkeypatch.setattr(bulk_insert, "STEP_ROWS", 1)
    monkeypatch.setattr(waiting_module.Waiting, "give_way", lambda self, most=0: 0.0)
    convs = [samples.chatgpt_conversation(cid=f"c-{i}", t0=samples.T0 + i * 86400) for i in range(2)]
    path = samples.chatgpt_zip(tmp_path / "e.zip", convs, images={"file-AbC123-photo.png": samples.png()})
    real_write, photos = history_write._Writer._write, []

    def write(self, made, *args):
        if any(r.attachment for r, _seg in made):
            photos.append(made[0][0].mid)
            if len(photos) == 2:
                raise RuntimeError("power cut")
        return real_write(self, made, *args)

    monkeypatch.setattr(history_write._Writer, "_write", write)
    with WritesComing(), pytest.raises(RuntimeError), HistoryImport(path, user=user) as imp:
        apply(imp)
    kept = Message.objects.get(profile=profile, mid=photos[0])
    assert not Message.objects.filter(profile=profile, mid=photos[1]).exists()
    assert Message.objects.filter(profile=profile).count() > 1  # the steps before the failure
    _dirs, files = default_storage.listdir(f"images/{profile.pk}")
    assert sorted(f"images/{profile.pk}/{f}" for f in files) == sorted([kept.attachment["path"], kept.attachment["thumb"]])
