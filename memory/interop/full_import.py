"""Full import of our own export (SPEC X2, X4, S4): dedupe by id, tombstones block, every record
checked before anything is written, then written in short batches (re-running finishes an
interrupted one). The public entry point; the phases live in memory.interop.full: read ->
check -> write, with the report beside them."""

from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, DataError, IntegrityError
from django.utils.translation import gettext

from memory.interop.full.check import SCHEMA
from memory.interop.full.read import (
    Export,
    ExportArchive,
    kind_records,
    open_export,
    open_export_path,
    read_plans,
)
from memory.interop.full.report import (
    COLUMNS,
    KINDS,
    BadExport,
    FullReport,
    ImportInterrupted,
    counts_by_kind,
)
from memory.interop.full.write import STEPS, Writes, kind_shown, start_profile, step_needed
from memory.interop.json_stream import BadFile


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
    export = open_export(data)
    plans = read_plans(export)
    if dry_run or not export.checked:
        # Issue 24 point 6: the data page's apply follows its preview of the same stored file,
        # which checked every record (`ExportFile.checked`): it reads the file once more, to write.
        checked = _pass(export, plans, user=user, report=FullReport(dry_run=True), out=Writes(), check=True,
                        progress=progress if dry_run else None)
        if dry_run:
            return checked
    out = Writes(rows=settings.PREVIOUSLY_IMPORT_BATCH_ROWS, progress=progress)
    try:
        return _pass(export, plans, user=user, report=FullReport(), out=out, check=False, progress=progress)
    except (DatabaseError, BadExport, BadFile, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ImportInterrupted(gettext(
            "The import stopped while writing %(kind)s (%(error)s). The %(batches)s batches written before it are"
            " kept; the same import run again finishes it (the data page's preview stays to apply again, the command"
            " takes the same file): it skips what is already there and writes the rest.") % {
            "kind": kind_shown(out.kind or "the profiles"), "error": f"{exc.__class__.__name__}: {exc}", "batches": f"{out.batches:,}"}
        ) from exc



def _pass(export: Export, plans: list, *, user, report: FullReport, out: Writes, check: bool,
          progress) -> FullReport:
    """One pass over the export: each profile made (or found), then each kind of record in the
    order the writes need (STEPS), every profile's of that kind read in one pass over the file,
    each record checked first when `check` (X4), then counted or written."""
    try:
        profiles = [start_profile(key, plan.members, user=user, report=report, out=out, files=export.files)
                    for key, plan in plans]
        read = set()
        for kind, step in STEPS:
            if not step_needed(step, profiles):
                continue
            if kind not in SCHEMA:  # a profile's own member
                for p, (_, plan) in zip(profiles, plans, strict=True):
                    out.profile = p.key
                    step(p, plan.members)
                continue
            # A kind read a second time (the lines, for their links) was checked in its first pass.
            for p, records in zip(profiles, kind_records(export, plans, kind, check=check and kind not in read),
                                  strict=True):
                out.profile = p.key
                step(p, records)
            read.add(kind)
        if progress:
            progress(kind_shown("the profiles"), len(plans), len(plans))
    except BadFile as exc:
        raise BadExport(str(exc)) from None
    except (KeyError, TypeError, ValueError, OverflowError, IntegrityError, DataError) as exc:
        if out.write:
            raise
        # A value the database's own constraints refuse is as malformed as a missing key.
        raise BadExport(gettext("malformed export: %(error)s. Nothing was written.") % {
            "error": f"{exc.__class__.__name__}: {exc}"}) from None
    return report


__all__ = ["COLUMNS", "KINDS", "BadExport", "ExportArchive", "FullReport", "ImportInterrupted", "counts_by_kind",
           "import_full", "open_export_path"]
