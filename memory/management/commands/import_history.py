"""Import another app's chat history (SPEC H1, issue 27): ChatGPT, Claude, Open WebUI,
SillyTavern, recognised by content. Checked whole before anything is written, then written in
short batches; re-running adds nothing and finishes an interrupted import. A SillyTavern
character card (PNG or JSON, H2) is recognised too and handed to `import_character_card`."""

import json
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from memory.interop.character_card import is_character_card
from memory.interop.history import HistoryImport, Refused, apply
from memory.interop.history.detect import APP_NAMES
from memory.interop.history.shapes import APPS
from memory.management import output
from memory.management.profiles import resolve_user
from memory.models.archive import PROFILE_KEY_RE


class Command(BaseCommand):
    help = "Import a ChatGPT, Claude, Open WebUI or SillyTavern export into a companion; re-running adds nothing."

    def add_arguments(self, parser):
        parser.add_argument("path", help="The export: a .zip, a .json or a SillyTavern .jsonl.")
        parser.add_argument("--user", required=True, help="The person whose companion receives the history.")
        parser.add_argument("--profile", help="The companion's key (created if missing); default: the current one.")
        parser.add_argument("--format", default="auto", choices=("auto", *APPS, "card"),
                            help="Which app made the file ('card': a SillyTavern character card).")
        parser.add_argument("--dry-run", action="store_true", help="Show what would be imported; write nothing.")
        parser.add_argument("--report-json", help="Also write the report as JSON to this file.")

    def handle(self, *args, **opts):
        user = resolve_user(opts["user"], returncode=2)
        path = Path(opts["path"])
        if not path.is_file():
            raise CommandError(f"{path}: file not found", returncode=2)
        key = opts["profile"]
        if key is not None and not PROFILE_KEY_RE.fullmatch(key):
            raise CommandError(f"--profile {key!r}: a key is 1-32 characters of a-z, 0-9, '_' or '-'", returncode=2)
        if opts["format"] == "card" or (opts["format"] == "auto" and is_character_card(path)):
            call_command("import_character_card", str(path), user=user.get_username(), profile=key,
                         dry_run=opts["dry_run"], report_json=opts["report_json"],
                         stdout=self.stdout, stderr=self.stderr)
            return
        try:
            with HistoryImport(path, user=user, profile_key=key, fmt=opts["format"]) as imp, \
                    output.progress(self.stderr) as progress:
                report = imp.preview(progress=progress) if opts["dry_run"] else apply(imp, progress=progress)
        except Refused as exc:
            raise CommandError(f"refused: {exc} Nothing was written.", returncode=1) from None
        except DatabaseError as exc:
            raise CommandError(f"{path}: the import stopped ({exc.__class__.__name__}: {exc}). What was written is"
                               " kept; run the same import again to finish it.", returncode=1) from None
        self._print(report)
        if opts["report_json"]:
            Path(opts["report_json"]).write_text(json.dumps(report.as_json(), ensure_ascii=False, indent=1))

    def _print(self, report) -> None:
        w = self.stdout.write
        w(f"{report.file}: {APP_NAMES[report.app]} export, {len(report.conversations):,} conversations"
          f" -> companion {report.profile!r}{'' if report.profile_exists else ' (new)'}")
        rows = [(c.title or c.key)[:48] for c in report.conversations[:20]]
        conv_rows = [
            (title, c.lines, c.alternatives, sum(c.skipped.values()), f"{c.images_found}/{c.images_missing}",
             _span(c), c.already, c.tombstoned, c.new)
            for title, c in zip(rows, report.conversations[:20], strict=False)
        ]
        t = report.total()
        headers = ["conversation", "lines", "alternatives", "skipped", "images found/missing", "dates",
                   "already archived", "kept out (deleted)", "new"]
        total = ["total", t.lines, t.alternatives, sum(t.skipped.values()), f"{t.images_found}/{t.images_missing}",
                 _span(t), t.already, t.tombstoned, t.new]
        w(output.table(headers, conv_rows, total=total))
        if len(report.conversations) > 20:
            w(f"(the first 20 of {len(report.conversations):,} conversations; --report-json has them all)")
        if t.skipped:
            w(output.table(["skipped kind", "count"], sorted(t.skipped.items())))
        w(f"candidate experiences (the app's memory and custom instructions): {report.experiences_new} new,"
          f" {report.experiences_already} already there")
        if report.dry_run:
            w("dry run: nothing was written")
        else:
            w(f"import complete: {report.written:,} messages written in {report.slices:,} new slices")


def _span(c) -> str:
    if not c.first:
        return "-"
    a, b = c.first.date().isoformat(), c.last.date().isoformat()
    return a if a == b else f"{a}..{b}"
