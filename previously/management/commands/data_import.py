"""The data page's full import (preview or apply), in a process of its own (previously/child.py):
the server starts it with the upload's token on stdin and reads back the report, the refusal or
the interruption, pickled (base64, one line). Not for typing by hand: `import_full` imports from
the shell."""

import base64
import pickle

from django.core.management.base import BaseCommand
from django.utils import translation

from memory.interop.full_import import BadExport, ImportInterrupted
from previously import child
from previously.pages.data.views import full_report


class Command(BaseCommand):
    help = "Preview or apply a full export uploaded on the data page (the server runs this; use import_full by hand)."
    requires_system_checks = []  # the parent's settings are taken on first (child.received)

    def handle(self, *args, **options):
        asked = child.received()
        translation.activate(asked["language"])
        try:
            answer = {"report": full_report(asked["token"], asked["user_id"], dry_run=asked["dry_run"])}
        except BadExport as exc:
            answer = {"refused": str(exc)}
        except ImportInterrupted as exc:
            answer = {"interrupted": str(exc)}
        self.stdout.write(base64.b64encode(pickle.dumps(answer)).decode("ascii"))
