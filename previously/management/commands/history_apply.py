"""The data page's history import, in a process of its own (previously/child.py): the server
starts it with the previewed upload's token on stdin and waits. Not for typing by hand: a history
file is imported from the shell with `import_history`."""

from django.core.management.base import BaseCommand

from previously import child
from previously.pages.data.history_run import run_apply


class Command(BaseCommand):
    help = "Apply a history upload previewed on the data page (the server runs this; use import_history by hand)."
    # The parent's settings are taken on first (child.received); checks ran in the server.
    requires_system_checks = []

    def handle(self, *args, **options):
        asked = child.received()
        state = run_apply(asked["token"], asked["user_id"], asked["profile_key"], asked["fmt"], asked["name"])
        child.reply(self.stdout, {"state": state})
