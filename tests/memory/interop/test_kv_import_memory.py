"""Issue 25 point 3 (BENCH §3): what keeps the legacy import's peak memory down, checked as
behaviour rather than as numbers (the numbers are bench.import_throughput's)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.interop.kv_import import import_kv
from memory.models import Message
from tests.memory.interop.conftest import mem, msg

pytestmark = pytest.mark.django_db

TS = 1760986800000


def _import(admin, dump_file, entries):
    with open(dump_file(entries), encoding="utf-8") as fh:
        return import_kv(fh=fh, user=admin)


def test_a_reimport_reads_what_exists_without_sorting_whole_tables(admin, dump_file):
    """The models' default orderings made the ids-by-profile lookups read and sort the message
    and fragment tables (+60 MB of mapped pages on 120k keys) instead of their unique indexes."""
    entries = [msg("owner", f"c_{n:016x}", "user", f"第 {n} 行 line {n} 🌙", TS + n * 60_000) for n in range(5)]
    entries += [mem(f"mem:owner:k{n}", "user", f"第 {n} 行 line {n} 🌙", TS + n * 60_000) for n in range(5)]
    _import(admin, dump_file, entries)
    with CaptureQueriesContext(connection) as queries:
        report = _import(admin, dump_file, entries)
    assert report.as_dict()["total"]["created"] == 0
    lookups = [q["sql"] for q in queries if q["sql"].startswith("SELECT") and
               ('FROM "memory_message"' in q["sql"] or 'FROM "memory_legacyfragment"' in q["sql"])]
    assert lookups and not [q for q in lookups if "ORDER BY" in q]


def test_the_import_reads_without_mmap_and_gives_it_back(admin, dump_file):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's mmap")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA mmap_size=1048576")
    seen = []
    original = Message.objects.filter

    def spy(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA mmap_size")
            seen.append(cursor.fetchone()[0])
        return original(*args, **kwargs)

    Message.objects.filter = spy
    try:
        _import(admin, dump_file, [msg("owner", "c_1", "user", "你好", TS)])
    finally:
        del Message.objects.filter
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA mmap_size")
        assert cursor.fetchone()[0] == 1048576
    assert seen and set(seen) == {0}
