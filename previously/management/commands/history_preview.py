"""The data page's history preview, in a process of its own (previously/child.py): the server
starts it with the upload's token on stdin and reads back the report, or the refusal
(child.reply). Not for typing by hand: `import_history --dry-run` previews from the shell."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from memory.interop.history import Refused
from previously import child
from previously.pages.data.history_run import preview_report


class Command(BaseCommand):
    help = "Preview a history upload for the data page (the server runs this; use import_history --dry-run by hand)."
    requires_system_checks = []  # the parent's settings are taken on first (child.received)

    def handle(self, *args, **options):
        asked = child.received()
        user = get_user_model().objects.get(pk=asked["user_id"])
        try:
            answer = {"report": preview_report(asked["token"], user, asked["name"], asked["key"], asked["fmt"])}
        except Refused as exc:
            answer = {"refused": {"file": exc.file, "problem": str(exc.problem), "record": exc.record}}
        child.reply(self.stdout, answer)
