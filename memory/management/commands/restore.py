"""Restore a backup (SPEC O6), then delete again everything deleted for good since it was taken
(the forget journal), so a restore never brings back what a person deleted."""

from django.core.management.base import BaseCommand, CommandError

from memory.backups import BackupError, check_backup, restore


class Command(BaseCommand):
    help = "Replace the database with a backup from `manage.py backup` and re-apply later deletes for good."

    def add_arguments(self, parser):
        parser.add_argument("file", help="the backup file (var/backups/previously-….sqlite3 or .pgdump)")
        parser.add_argument("--noinput", "--no-input", action="store_false", dest="interactive",
                            help="do not ask for confirmation")

    def handle(self, *args, **options):
        try:
            backup = check_backup(options["file"])
            if options["interactive"]:
                answer = input(f"Replace the whole database with the backup of {backup.started_at:%Y-%m-%d %H:%M} UTC? "
                               "Everything written since is lost (deletes for good are re-applied). Type 'yes': ")
                if answer.strip().lower() != "yes":
                    raise CommandError("restore cancelled; nothing was changed")
            report = restore(backup.path)
        except BackupError as error:
            raise CommandError(str(error)) from error
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(report.reapplied.items())) or "none"
        self.stdout.write(f"restored {backup.path} (taken {backup.started_at:%Y-%m-%d %H:%M:%S} UTC); "
                          f"deletes for good re-applied: {report.total} ({kinds})")
        since = report.journal_since
        if since and since > backup.started_at:
            self.stderr.write(f"warning: the forget journal starts at {since:%Y-%m-%d %H:%M} UTC, after this backup; "
                              "records deleted before then and after the backup cannot be re-applied")
