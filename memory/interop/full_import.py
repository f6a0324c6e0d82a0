"""Full import of our own export (SPEC X2, X4, S4): dedupe by id, tombstones block, every record
checked before anything is written, then written in short batches (re-running finishes an
interrupted one). The public entry point; the phases live in memory.interop.full: read ->
check -> write, with the report beside them."""

from collections.abc import Callable, Iterable

from django.conf import settings
from django.db import DatabaseError, DataError, IntegrityError

from memory.interop.full.read import (
    ExportArchive,
    Files,
    open_export,
    open_export_path,
    read_profiles,
)
from memory.interop.full.report import (
    COLUMNS,
    KINDS,
    BadExport,
    FullReport,
    ImportInterrupted,
    counts_by_kind,
)
from memory.interop.full.write import Writes, import_profile
from memory.interop.json_stream import BadFile, Header


def import_full(*, data, user, dry_run: bool = False, progress: Callable[[str, int, int], None] | None = None) -> FullReport:
    """Import an export (a dict, an `ExportFile` read as it streams, or an `ExportArchive`, a JSON
    or zip export opened by `open_export_path`) into `user`'s profiles;
    re-running it changes nothing (X2).

    S4 (issue 16): the whole file is checked first by a pass that only reads — no transaction,
    so no write lock — which is all the dry run (the data page's preview) does. The apply then
    writes in batches of PREVIOUSLY_IMPORT_BATCH_ROWS rows, each in its own short transaction,
    so another writer gets SQLite's lock between two; `progress` is called after each batch,
    outside any transaction. A database error part-way leaves the batches before it in place:
    as re-running skips what exists, running the same import again finishes it."""
    header, profiles, files = open_export(data)
    checked = _each_profile(profiles, header, user=user, report=FullReport(dry_run=True), out=Writes(),
                            progress=progress if dry_run else None, files=files)
    if dry_run:
        return checked
    out = Writes(rows=settings.PREVIOUSLY_IMPORT_BATCH_ROWS, progress=progress)
    try:
        return _each_profile(profiles, header, user=user, report=FullReport(), out=out, progress=progress,
                             files=files)
    except (DatabaseError, BadExport, BadFile, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ImportInterrupted(
            f"The import stopped while writing {out.kind or 'the profiles'} ({exc.__class__.__name__}: {exc})."
            f" The {out.batches:,} batches written before it are kept; the same import run again finishes it"
            " (the data page's preview stays to apply again, the command takes the same file): it skips what is"
            " already there and writes the rest."
        ) from exc



def _each_profile(profiles: Callable[[], Iterable], header: Header, *, user, report: FullReport, out: Writes,
                  progress, files: Files) -> FullReport:
    """One pass over the export: each profile read and checked (X4), then counted or written."""
    try:
        for position, pdata in read_profiles(profiles, header):
            import_profile(pdata, user=user, report=report, out=out, files=files)
            if progress:
                progress("profiles", position + 1, header.profiles)
    except BadFile as exc:
        raise BadExport(str(exc)) from None
    except (KeyError, TypeError, ValueError, OverflowError, IntegrityError, DataError) as exc:
        if out.write:
            raise
        # A value the database's own constraints refuse is as malformed as a missing key.
        raise BadExport(f"malformed export: {exc.__class__.__name__}: {exc}. Nothing was written.") from None
    return report


__all__ = ["COLUMNS", "KINDS", "BadExport", "ExportArchive", "FullReport", "ImportInterrupted", "counts_by_kind",
           "import_full", "open_export_path"]
