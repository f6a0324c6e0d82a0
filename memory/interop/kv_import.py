"""Legacy KV migration (SPEC X3, X4, X5; LEGACY_KV.md rules 1-9): the public entry point.

The phases live in memory.interop.legacy: read -> plan -> write, with the report beside them.
Nothing is written unless everything read well; the plan and the writes share one transaction.
"""


import gc
from contextlib import contextmanager
from typing import IO

from django.db import connection, transaction

from memory.interop.analyse import Analyser
from memory.interop.legacy.plan import fragment_mid, plan_import
from memory.interop.legacy.read import read_records
from memory.interop.legacy.report import BadDump, Progress, Report, no_progress
from memory.interop.legacy.write import write_plan


def import_kv(
    *,
    fh: IO[str],
    user,
    dry_run: bool = False,
    skip_bad: bool = False,
    progress: Progress = no_progress,
) -> Report:
    """Import a legacy KV dump for `user`; all or nothing (X3, X4). Raises BadDump."""
    report = Report(dry_run=dry_run)
    # The recall index's tokenising runs in a worker forked now, while this process is small
    # (memory.interop.analyse); a dry run writes nothing, so it needs none.
    with Analyser(parallel=not dry_run) as analyser, _gc_paused(), _unmapped():
        by_kind = read_records(fh, skip_bad=skip_bad, report=report, progress=progress)
        with transaction.atomic():
            plan = plan_import(by_kind, user=user, report=report, progress=progress)
            del by_kind
            if not dry_run:
                write_plan(plan, progress=progress, analyser=analyser)
    return report


@contextmanager
def _unmapped():
    """SQLite reads through plain reads, not mmap, for the import's length.

    The import's lookups (ids by profile, the lines highlights name) are scattered across a
    large file; through mmap every page the kernel maps around them counts in the process's
    resident memory (BENCH §3: +60 MB of a 94 MB database on a re-import). Restored after.
    """
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA mmap_size")
        (size,) = cursor.fetchone()
        cursor.execute("PRAGMA mmap_size=0")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA mmap_size={int(size)}")


@contextmanager
def _gc_paused():
    """No cyclic garbage collection while the import holds its records.

    The import keeps a few hundred thousand small containers alive at once, so every full
    collection walks all of them again and again for nothing (they are all live); reference
    counting still frees everything as usual. Restored on the way out.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["BadDump", "Report", "fragment_mid", "import_kv"]
