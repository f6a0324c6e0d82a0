"""The full-text index beside the archive (SPEC R1, R2, D3), on SQLite FTS5 and PostgreSQL."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.archive import archive_message
from memory.models import Message, RecallDocument, Slice
from memory.recall.index import documents_for, index_messages, remove_messages, search
from memory.recall.tokenize import tokenize
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db


def _say(profile, n, text):
    return archive_message(profile=profile, mid=f"c_{n:016x}", speaker="user", content=text).message


def _bulk_indexed(profile, count):
    """`count` lines of one slice, bulk-written and indexed as an import writes them (no
    statistics yet on PostgreSQL)."""
    now = timezone.now()
    slice_ = Slice.objects.create(profile=profile, key="2026-01-01-0000", started_at=now, last_message_at=now)
    lines = Message.objects.bulk_create(
        Message(profile=profile, slice=slice_, mid=f"c_{n:016x}", speaker="user", content=f"lantern {n} 灯笼{n}",
                created_at=now, tz="UTC")
        for n in range(count)
    )
    index_messages(lines)
    return lines


def _ids(profile, query, limit=10):
    return [hit.message_id for hit in search(profile_id=profile.pk, tokens=tokenize(query), limit=limit)]


def test_archived_messages_are_found_by_chinese_and_english_words():
    profile = ProfileFactory()
    zh = _say(profile, 1, "我下周三要交季度报告")
    en = _say(profile, 2, "The quarterly report is due next Wednesday")
    _say(profile, 3, "今天天气不错 nice weather")
    assert _ids(profile, "季度报告什么时候交") == [zh.pk]
    assert _ids(profile, "when is the REPORT due?")[0] == en.pk


def test_the_more_relevant_message_ranks_first():
    profile = ProfileFactory()
    _say(profile, 1, "cats are nice")
    best = _say(profile, 2, "my cat Mochi loves tuna, Mochi is a cat")
    _say(profile, 3, "dogs bark")
    assert _ids(profile, "Mochi cat")[0] == best.pk


def test_search_never_crosses_profiles_p2():
    mine, theirs = ProfileFactory(), ProfileFactory()
    _say(theirs, 1, "secret plans for Friday")
    assert _ids(mine, "secret plans") == []


def test_another_persons_big_archive_never_crowds_my_lines_out_p2_s4():
    """Another person's lines that match better (a big import) fill the index's first `limit`;
    my own line is still found, in order (SQLite's index holds every profile's lines)."""
    mine, theirs = ProfileFactory(), ProfileFactory()
    for n in range(30):
        _say(theirs, 100 + n, f"Lisbon {n}")
    long_one = _say(mine, 1, "we talked for hours about moving to Lisbon one day, maybe next spring")
    short_one = _say(mine, 2, "Lisbon again")
    assert _ids(mine, "Lisbon", limit=5) == [short_one.pk, long_one.pk]
    assert len(_ids(theirs, "Lisbon", limit=5)) == 5


def test_removed_messages_are_never_returned_d3():
    profile = ProfileFactory()
    gone = _say(profile, 1, "delete this sentence about pineapples")
    kept = _say(profile, 2, "pineapples are tasty")
    assert remove_messages([gone.pk]) == 1
    assert _ids(profile, "pineapples") == [kept.pk]
    assert not RecallDocument.objects.filter(message_id=gone.pk).exists()


def test_reindexing_a_message_does_not_duplicate_it():
    profile = ProfileFactory()
    message = _say(profile, 1, "团圆饭 reunion dinner")
    index_messages([message])
    index_messages([message])
    assert _ids(profile, "reunion 团圆") == [message.pk]


def test_soft_deleted_messages_are_not_indexed():
    profile = ProfileFactory()
    message = _say(profile, 1, "hidden words here")
    remove_messages([message.pk])
    Message.objects.filter(pk=message.pk).update(deleted_at="2026-01-01T00:00Z")
    message.refresh_from_db()
    assert index_messages([message]) == 0
    assert _ids(profile, "hidden words") == []


def test_the_index_is_written_with_the_archive_write():
    profile = ProfileFactory()
    message = _say(profile, 1, "emoji 🐱 and 中文 together")
    assert RecallDocument.objects.get(message=message).tokens == "emoji 中文 togeth"


def test_a_very_long_word_is_archived_and_found_by_its_start():
    profile = ProfileFactory()
    message = _say(profile, 1, "link " + "x" * 4000)  # PostgreSQL refuses lexemes over 2047 bytes
    assert _ids(profile, "x" * 4000) == [message.pk]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner without statistics")
def test_documents_are_never_scanned_once_per_hit_bench_4():
    """A vector hit's documents are read with each table scanned at most once, never the archive
    once per hit: PostgreSQL with no statistics yet (a new or fast-growing archive, autovacuum
    off) takes `deleted_at IS NULL` for one row, and nested a scan of every document inside a
    scan of every message (10–30 ms a question at a few hundred lines under `make loadtest`)."""
    lines = _bulk_indexed(ProfileFactory(), 400)
    wanted = [lines[3].pk, lines[200].pk, lines[399].pk]
    with CaptureQueriesContext(connection) as queries:
        found = documents_for(wanted)
    assert sorted(c.message_id for c in found) == sorted(wanted)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries.captured_queries[-1]["sql"])
        plan = cursor.fetchone()[0][0]["Plan"]
        cursor.execute("SELECT sum(pg_relation_size(t::regclass)) / 8192 FROM unnest(%s::text[]) t",
                       [["memory_message", "memory_recalldocument"]])
        pages = int(cursor.fetchone()[0])
    read = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    # Both tables once, and a few index pages for each hit.
    assert read <= pages + 10 * len(wanted), (read, pages)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's full-text step")
def test_the_best_matches_are_looked_up_by_key_not_by_walking_the_profile_bench_2():
    """Issue 24 point 10: the full-text step's best ids are read by primary key. SQLite's planner
    took the profile's index for `d.profile_id = ?` and walked every line of the profile for a
    few hundred ids: 13 ms a question at 100k lines, 1.4 ms by key."""
    profile = ProfileFactory()
    _bulk_indexed(profile, 300)
    with CaptureQueriesContext(connection) as queries:
        assert _ids(profile, "lantern")
    looked_up = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT d.message_id")]
    assert looked_up
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + looked_up[-1])
        plan = " / ".join(row[-1] for row in cursor.fetchall())
    assert "(profile_id=?)" not in plan, plan
