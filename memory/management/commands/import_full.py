"""Import a full export (SPEC X2, S4): dedupe by id, tombstones block, checked whole before
anything is written, then written in short batches (re-running finishes an interrupted one)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext

from memory.interop.full_import import (
    COLUMNS,
    BadExport,
    ImportInterrupted,
    import_full,
    open_export_path,
)
from memory.management import output
from memory.management.profiles import resolve_user


class Command(BaseCommand):
    help = "Import a Previously JSON export into a user's profiles; re-running changes nothing."

    def add_arguments(self, parser):
        parser.add_argument("path", help="The export file (written by export_full --format json: a JSON file, or a zip with images).")
        parser.add_argument("--dry-run", action="store_true", help="Show the counts per kind; write nothing.")
        parser.add_argument("--user", help="Owner of the imported profiles (default: the first superuser).")
        output.add_language_argument(parser)

    def handle(self, *args, **opts):
        with output.in_language(opts["language"]):
            self._import(opts)

    def _import(self, opts):
        user = resolve_user(opts["user"], returncode=2)
        path = Path(opts["path"])
        if not path.is_file():
            raise CommandError(gettext("export file %(path)s not found") % {"path": repr(str(path))}, returncode=2)
        try:
            with open_export_path(path, name=str(path)) as export, output.progress(self.stderr) as progress:
                report = import_full(data=export, user=user, dry_run=opts["dry_run"], progress=progress)
        except BadExport as exc:
            raise CommandError(f"{path}: {exc}", returncode=1) from None
        except ImportInterrupted as exc:
            raise CommandError(f"{path}: {exc}", returncode=1) from None
        for note in report.notes:
            self.stdout.write(note)
        self.stdout.write(output.table([output.column("kind"), *map(output.column, COLUMNS)], report.rows()))
        self.stdout.write(output.finished(dry_run=report.dry_run))
