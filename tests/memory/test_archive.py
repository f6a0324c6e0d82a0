"""The archive write (SPEC A2) and slice assignment (S1)."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from memory.archive import MidConflict, archive_message
from memory.hashing import content_hash
from memory.interop.legacy.rows import MessageRow
from memory.interop.legacy.write import assign_slices
from memory.models import Message, RecallDocument, RecallStats, Slice, Tombstone
from tests.factories import ProfileFactory, TombstoneFactory


def archive(profile, **kwargs):
    kwargs.setdefault("mid", "c_0123456789abcdef")
    kwargs.setdefault("speaker", "user")
    kwargs.setdefault("content", "你好 hello 🐱")
    return archive_message(profile=profile, **kwargs)


@pytest.mark.django_db
def test_archive_stores_the_line_verbatim_with_its_local_clock(profile):
    at = timezone.datetime(2026, 11, 29, 13, 5, tzinfo=timezone.UTC)
    result = archive(profile, created_at=at, tz="Asia/Shanghai")
    message = Message.objects.get(pk=result.message.pk)
    assert result.created is True
    assert message.content == "你好 hello 🐱"
    assert (message.local_day_key, message.local_hour, message.period) == ("2026-11-29", 21, "evening")
    assert message.tz == "Asia/Shanghai"
    assert message.content_hash == content_hash("owner", "你好 hello 🐱")


@pytest.mark.django_db
def test_same_mid_same_content_returns_the_stored_row_and_writes_nothing_a2(profile):
    first = archive(profile)
    again = archive(profile)
    assert again.created is False
    assert again.message.pk == first.message.pk
    assert Message.objects.count() == 1


@pytest.mark.django_db
def test_a_resend_after_the_gap_writes_nothing_not_even_the_slice_a2_s1(profile):
    """No look-up precedes the write: the unique mid rolls back the slice close the gap began."""
    t0 = timezone.datetime(2026, 11, 29, 8, 0, tzinfo=timezone.UTC)
    first = archive(profile, created_at=t0)
    for content in ("你好 hello 🐱", "something else"):
        try:
            again = archive(profile, content=content, created_at=t0 + timedelta(hours=2))
        except MidConflict:
            again = None
        assert again is None or (again.created is False and again.closed_slice is None)
        assert list(Slice.objects.values_list("pk", "ended_at", "last_message_at")) == [(first.message.slice_id, None, t0)]
        assert Message.objects.count() == 1
        assert RecallDocument.objects.count() == 1 and RecallStats.objects.get().n_docs == 1


@pytest.mark.django_db
def test_same_mid_different_content_is_a_conflict_naming_the_mid_a2(profile):
    archive(profile)
    with pytest.raises(MidConflict) as excinfo:
        archive(profile, content="something else")
    assert "c_0123456789abcdef" in str(excinfo.value)
    assert excinfo.value.code == "mid_conflict"
    assert Message.objects.get().content == "你好 hello 🐱"


@pytest.mark.django_db
def test_the_same_mid_in_another_profile_is_another_message(profile):
    other = ProfileFactory(user=profile.user, key="second")
    archive(profile)
    archive(other, content="different words")
    assert Message.objects.count() == 2


@pytest.mark.django_db
def test_messages_within_the_gap_share_a_slice_s1(profile):
    t0 = timezone.now()
    a = archive(profile, mid="c_000000000000000a", created_at=t0)
    b = archive(profile, mid="c_000000000000000b", created_at=t0 + timedelta(minutes=29))
    assert a.message.slice_id == b.message.slice_id
    assert b.closed_slice is None


@pytest.mark.django_db
def test_each_line_moves_the_slice_end_forward_so_the_gap_counts_from_the_last_line_s1(profile):
    t0 = timezone.datetime(2026, 11, 29, 8, 0, tzinfo=timezone.UTC)
    a = archive(profile, mid="c_000000000000000a", created_at=t0)
    archive(profile, mid="c_000000000000000b", created_at=t0 + timedelta(minutes=29))
    archive(profile, mid="c_000000000000000c", created_at=t0 + timedelta(minutes=10))  # late: no step back
    assert Slice.objects.get(pk=a.message.slice_id).last_message_at == t0 + timedelta(minutes=29)
    d = archive(profile, mid="c_000000000000000d", created_at=t0 + timedelta(minutes=58))
    assert d.message.slice_id == a.message.slice_id and d.closed_slice is None
    assert Slice.objects.get(pk=a.message.slice_id).last_message_at == t0 + timedelta(minutes=58)


@pytest.mark.django_db
def test_an_idle_gap_closes_the_slice_and_opens_a_new_one_s1(profile):
    t0 = timezone.datetime(2026, 11, 29, 8, 0, tzinfo=timezone.UTC)
    a = archive(profile, mid="c_000000000000000a", created_at=t0)
    b = archive(profile, mid="c_000000000000000b", created_at=t0 + timedelta(minutes=31))
    assert a.message.slice_id != b.message.slice_id
    closed = Slice.objects.get(pk=a.message.slice_id)
    assert b.closed_slice == closed
    assert closed.ended_at == t0 and closed.close_reason == "gap"
    assert b.message.slice.key == "2026-11-29-0831"
    assert Slice.objects.open().count() == 1


@pytest.mark.django_db
def test_new_conversation_starts_a_new_slice_even_within_the_gap(profile):
    t0 = timezone.datetime(2026, 11, 29, 8, 0, tzinfo=timezone.UTC)
    a = archive(profile, mid="c_000000000000000a", created_at=t0)
    b = archive(profile, mid="c_000000000000000b", created_at=t0, new_conversation=True)
    assert b.closed_slice.pk == a.message.slice_id
    assert b.closed_slice.close_reason == "new_conversation"
    # The same start minute is taken, so the new slice moves to the next free minute.
    assert b.message.slice.key == "2026-11-29-0801"


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_writers_of_one_mid_store_it_once_a2():
    profile = ProfileFactory()
    results, errors = [], []
    barrier = threading.Barrier(2)

    def write():
        try:
            barrier.wait()
            results.append(archive(profile).created)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [False, True]
    assert Message.objects.filter(profile=profile).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_with_different_content_one_wins_one_conflicts_a2():
    profile = ProfileFactory()
    outcomes = []
    barrier = threading.Barrier(2)

    def write(text):
        try:
            barrier.wait()
            archive(profile, content=text)
            outcomes.append("stored")
        except MidConflict:
            outcomes.append("conflict")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(t,)) for t in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict", "stored"]
    assert Message.objects.filter(profile=profile).count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_archive_write_holds_the_profile_row_lock_until_it_commits_on_postgresql_a2():
    """Writers of one profile are serialised (its slice is opened once): on PostgreSQL the
    tombstone check of the archive write also takes the profile's row lock, in one round trip."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers with its IMMEDIATE transaction, not row locks")
    profile, elsewhere = ProfileFactory(), ProfileFactory(key="elsewhere")
    warm, locked, ends = threading.Event(), threading.Event(), {}

    def first():
        try:
            warm.wait(30)
            with transaction.atomic():
                assert Tombstone.objects.line_deleted(profile.pk, "c_0123456789abcdef", lock_profile=True) is False
                locked.set()
                time.sleep(0.5)
                ends["first"] = time.monotonic()  # the lock is still held here
        finally:
            connections.close_all()

    def second():
        try:
            archive(elsewhere)  # its first write's set-up (connection, model) is not timed below
            warm.set()
            locked.wait(10)
            archive(profile, mid="c_00000000000000ff")
            ends["second"] = time.monotonic()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ends["second"] > ends["first"]  # it waited for the first transaction's end
    assert Message.objects.filter(profile=profile).count() == 1


def test_sqlite_runs_in_wal_mode_when_it_is_the_database(db):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite-only setting")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0].lower() == "wal"


@pytest.mark.django_db
def test_slice_manager_plain_sql_gives_what_the_querysets_give_s1(profile):
    """Slice.objects.newest_open / touch pin the archive write's plain SQL to the ORM it mirrors."""
    t0 = timezone.datetime(2026, 11, 29, 8, 0, tzinfo=timezone.UTC)
    other = ProfileFactory(key="other")
    for p, minutes in ((profile, 0), (profile, 40), (profile, 90), (other, 120)):
        archive(p, mid=f"c_{minutes:016x}", created_at=t0 + timedelta(minutes=minutes))
    Slice.objects.filter(profile=profile, key="2026-11-29-0930").update(ended_at=None)  # two open at once
    expected = Slice.objects.for_profile(profile).open().order_by("-started_at").first()
    assert Slice.objects.newest_open(profile.pk) == expected
    assert Slice.objects.newest_open(ProfileFactory(key="empty").pk) is None
    Slice.objects.touch(expected.pk, at=t0 + timedelta(hours=5))
    assert Slice.objects.get(pk=expected.pk).last_message_at == t0 + timedelta(hours=5)


@pytest.mark.django_db
def test_line_deleted_plain_sql_gives_what_the_queryset_gives_d2(profile):
    """Tombstone.objects.line_deleted pins the archive write's plain SQL to the ORM it mirrors."""
    other = ProfileFactory(key="other")
    TombstoneFactory(profile=profile, kind=Tombstone.Kind.MESSAGE, object_id="c_00000000000000aa")
    TombstoneFactory(profile=profile, kind=Tombstone.Kind.HIGHLIGHT, object_id="c_00000000000000bb")
    TombstoneFactory(profile=other, kind=Tombstone.Kind.MESSAGE, object_id="c_00000000000000cc")
    for p in (profile, other):
        for mid in ("c_00000000000000aa", "c_00000000000000bb", "c_00000000000000cc", "c_00000000000000dd"):
            expected = Tombstone.objects.filter(profile=p, kind=Tombstone.Kind.MESSAGE, object_id=mid).exists()
            for lock in (False, True):
                assert Tombstone.objects.line_deleted(p.pk, mid, lock_profile=lock) is expected, (p.key, mid, lock)
    assert Tombstone.objects.line_deleted(profile.pk, "c_00000000000000aa")  # the check is not vacuous


@pytest.mark.django_db
def test_the_bulk_import_and_the_live_archive_key_slices_alike_s1(profile):
    """One rule: a taken start minute moves to the next free one, in both writers."""
    t0 = timezone.datetime(2026, 11, 29, 8, 0, tzinfo=timezone.UTC)
    archive(profile, mid="c_000000000000000a", created_at=t0)
    Slice.objects.update(ended_at=t0)
    row = MessageRow(mid="c_000000000000000b", speaker="user", content="x", created_at=t0 + timedelta(hours=2),
                     legacy_key="k", content_hash="61", legacy_extra={})
    Slice.objects.create(profile=profile, key="2026-11-29-1000", started_at=t0 + timedelta(hours=9),
                         last_message_at=t0 + timedelta(hours=9), ended_at=t0 + timedelta(hours=9))
    assign_slices(profile=profile, messages=[row])
    assert Slice.objects.get(pk=row.slice_id).key == "2026-11-29-1001"
    live = archive(profile, mid="c_000000000000000c", created_at=t0 + timedelta(hours=2, seconds=5),
                   new_conversation=True)
    assert live.message.slice.key == "2026-11-29-1002"


@pytest.mark.django_db(transaction=True)
def test_a_line_is_embedded_before_its_write_transaction_not_inside_it(embedded_texts):
    """Issue 24 point 11: the model's forward pass for a new line runs before the archive's
    write transaction opens (SQLite's write lock is held from its BEGIN), never inside it."""
    seen = embedded_texts
    archive_message(profile=ProfileFactory(), mid="c_00000000000000e1", speaker="user", content="embedded ahead 先嵌入")
    assert ("embedded ahead 先嵌入", False) in seen
    assert ("embedded ahead 先嵌入", True) not in seen
