"""Import another app's chat history (SPEC H1, issue 27): ChatGPT, Claude, Open WebUI,
SillyTavern, recognised by content. Checked whole before anything is written, then written in
short batches; re-running adds nothing and finishes an interrupted import. A SillyTavern
character card (PNG or JSON, H2) is recognised too and handed to `import_character_card`, so a
PNG or a card's JSON that is not a card we take is refused with the card's own problem."""

import json
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from django.utils.translation import gettext

from memory.interop.character_card import looks_like_card
from memory.interop.history import HistoryImport, Refused, apply
from memory.interop.history.detect import APP_NAMES
from memory.interop.history.plan import Stage
from memory.interop.history.shapes import APPS
from memory.management import output
from memory.management.profiles import resolve_user
from memory.models.archive import PROFILE_KEY_RE

HEADERS = ("conversation", "lines", "alternatives", "skipped", "images found/missing", "dates", "already archived",
           "kept out (deleted)", "new")


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
        output.add_language_argument(parser)

    def handle(self, *args, **opts):
        with output.in_language(opts["language"]):
            self._import(opts)

    def _import(self, opts):
        user = resolve_user(opts["user"], returncode=2)
        path = Path(opts["path"])
        if not path.is_file():
            raise CommandError(gettext("%(path)s: file not found") % {"path": path}, returncode=2)
        key = opts["profile"]
        if key is not None and not PROFILE_KEY_RE.fullmatch(key):
            raise CommandError(gettext("--profile %(key)s: a key is 1-32 characters of a-z, 0-9, '_' or '-'") % {
                "key": repr(key)}, returncode=2)
        if opts["format"] == "card" or (opts["format"] == "auto" and looks_like_card(path)):
            call_command("import_character_card", str(path), user=user.get_username(), profile=key,
                         dry_run=opts["dry_run"], report_json=opts["report_json"],
                         stdout=self.stdout, stderr=self.stderr)
            return
        try:
            with HistoryImport(path, user=user, profile_key=key, fmt=opts["format"]) as imp, \
                    output.progress(self.stderr) as draw:
                def progress(stage: str, done: int, total: int) -> None:
                    draw(str(Stage.LABELS[stage]), done, total)

                report = imp.preview(progress=progress) if opts["dry_run"] else apply(imp, progress=progress)
        except Refused as exc:
            raise CommandError(gettext("refused: %(reason)s Nothing was written.") % {"reason": exc}, returncode=1) from None
        except DatabaseError as exc:
            raise CommandError(gettext("%(path)s: the import stopped (%(error)s). What was written is kept; run the same"
                                       " import again to finish it.") % {
                "path": path, "error": f"{exc.__class__.__name__}: {exc}"}, returncode=1) from None
        self._print(report)
        if opts["report_json"]:
            Path(opts["report_json"]).write_text(json.dumps(report.as_json(), ensure_ascii=False, indent=1))

    def _print(self, report) -> None:
        w = self.stdout.write
        w((gettext("%(file)s: %(app)s export, %(n)s conversations -> companion %(profile)s") if report.profile_exists
           else gettext("%(file)s: %(app)s export, %(n)s conversations -> companion %(profile)s (new)")) % {
            "file": report.file, "app": APP_NAMES[report.app], "n": f"{len(report.conversations):,}",
            "profile": repr(report.profile)})
        rows = [(c.title or c.key)[:48] for c in report.conversations[:20]]
        conv_rows = [
            (title, c.lines, c.alternatives, sum(c.skipped.values()), f"{c.images_found}/{c.images_missing}",
             _span(c), c.already, c.tombstoned, c.new)
            for title, c in zip(rows, report.conversations[:20], strict=False)
        ]
        t = report.total()
        headers = [output.column(h) for h in HEADERS]
        total = [output.column("total"), t.lines, t.alternatives, sum(t.skipped.values()), f"{t.images_found}/{t.images_missing}",
                 _span(t), t.already, t.tombstoned, t.new]
        w(output.table(headers, conv_rows, total=total))
        if len(report.conversations) > 20:
            w(gettext("(the first 20 of %(n)s conversations; --report-json has them all)") % {
                "n": f"{len(report.conversations):,}"})
        if t.skipped:
            w(output.table([output.column("skipped kind"), output.column("count")],
                           sorted(t.skipped.items())))
        w(gettext("candidate experiences (the app's memory and custom instructions): %(new)s new, %(already)s already"
                  " there") % {"new": report.experiences_new, "already": report.experiences_already})
        if report.dry_run:
            w(output.finished(dry_run=True))
        else:
            w(gettext("import complete: %(n)s messages written in %(slices)s new slices") % {
                "n": f"{report.written:,}", "slices": f"{report.slices:,}"})


def _span(c) -> str:
    if not c.first:
        return "-"
    a, b = c.first.date().isoformat(), c.last.date().isoformat()
    return a if a == b else f"{a}..{b}"
