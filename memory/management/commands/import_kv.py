"""Migrate a Cloudflare KV dump of the legacy store into the archive (SPEC X3, LEGACY_KV.md).

Exit status: 0 done, 1 bad input (nothing written), 2 usage error.
"""

import json
import sys
from contextlib import nullcontext
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext

from memory.interop.kv_import import BadDump, import_kv
from memory.interop.legacy.report import COLUMNS
from memory.management import output
from memory.management.profiles import resolve_user

MAX_NOTES = 200


class Command(BaseCommand):
    help = "Import a legacy KV dump (bulk-put array or bulk-get object); all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("dump", help="Path of the dump file (JSON; `-` reads standard input).")
        parser.add_argument("--dry-run", action="store_true", help="Report what would happen; write nothing.")
        parser.add_argument(
            "--skip-bad", action="store_true", help="Skip and report malformed records instead of stopping."
        )
        parser.add_argument("--user", help="Owner of the imported profiles (default: the first superuser).")
        parser.add_argument("--report-json", help="Also write the final table's counts to this JSON file.")
        output.add_language_argument(parser)

    def handle(self, *args, **opts):
        with output.in_language(opts["language"]):
            self._import(opts)

    def _import(self, opts):
        user = resolve_user(opts["user"], returncode=2)
        path = opts["dump"]
        if path != "-" and not Path(path).is_file():
            raise CommandError(gettext("dump file %(path)s not found; pass the path of a KV dump") % {"path": repr(path)},
                               returncode=2)
        try:
            with nullcontext(sys.stdin) if path == "-" else open(path, encoding="utf-8") as fh:
                with output.progress(self.stderr) as progress:
                    report = import_kv(
                        fh=fh, user=user, dry_run=opts["dry_run"], skip_bad=opts["skip_bad"], progress=progress,
                    )
        except BadDump as exc:
            raise CommandError(str(exc), returncode=1) from None
        except UnicodeDecodeError as exc:
            raise CommandError(gettext("the dump is not UTF-8 text (%(error)s). Nothing was written.") % {"error": exc},
                               returncode=1) from None
        for note in report.notes[:MAX_NOTES]:
            self.stdout.write(note)
        if len(report.notes) > MAX_NOTES:
            self.stdout.write(gettext("... and %(n)s more (see --report-json)") % {"n": len(report.notes) - MAX_NOTES})
        totals = report.as_dict()["total"]
        rows = [[family, *(c[col] for col in COLUMNS)] for family, c in report.rows()]
        self.stdout.write(output.table([output.column("family"), *map(output.column, COLUMNS)], rows,
                                       total=[output.column("total"), *(totals[c] for c in COLUMNS)]))
        self.stdout.write(output.finished(dry_run=report.dry_run))
        if opts["report_json"]:
            Path(opts["report_json"]).write_text(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
