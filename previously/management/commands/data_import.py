"""The data page's full import (preview or apply), in a process of its own (previously/child.py):
the server starts it with the upload's token on stdin. A preview hands back its report or its
refusal (child.reply); an apply writes its progress and its end for the page
(previously/pages/data/progress.py). Not for typing by hand: `import_full` imports from the
shell."""

from django.core.management.base import BaseCommand

from memory.interop.full_import import BadExport
from previously import child
from previously.pages.data.views import preview_report, run_full_apply


class Command(BaseCommand):
    help = "Preview or apply a full export uploaded on the data page (the server runs this; use import_full by hand)."
    requires_system_checks = []  # the parent's settings are taken on first (child.received)

    def handle(self, *args, **options):
        asked = child.received()
        if not asked["dry_run"]:  # its progress and end written for the page, how it ended said to the server
            child.reply(self.stdout, {"state": run_full_apply(asked["token"], asked["user_id"])})
            return
        try:
            answer = {"report": preview_report(asked["token"], asked["user_id"])}
        except BadExport as exc:
            answer = {"refused": str(exc)}
        child.reply(self.stdout, answer)
