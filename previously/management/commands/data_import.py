"""The data page's full import (preview or apply), in a process of its own (previously/child.py):
the server starts it with the upload's token on stdin and reads back the report, the refusal or
the interruption (child.reply). Not for typing by hand: `import_full` imports from
the shell."""

from django.core.management.base import BaseCommand

from memory.interop.full_import import BadExport, ImportInterrupted
from previously import child
from previously.pages.data.views import full_report


class Command(BaseCommand):
    help = "Preview or apply a full export uploaded on the data page (the server runs this; use import_full by hand)."
    requires_system_checks = []  # the parent's settings are taken on first (child.received)

    def handle(self, *args, **options):
        asked = child.received()
        try:
            answer = {"report": full_report(asked["token"], asked["user_id"], dry_run=asked["dry_run"])}
        except BadExport as exc:
            answer = {"refused": str(exc)}
        except ImportInterrupted as exc:
            answer = {"interrupted": str(exc)}
        child.reply(self.stdout, answer)
