"""Take a backup now (SPEC O6): a consistent copy while the server runs, checked, kept
PREVIOUSLY_BACKUP_KEEP_DAYS days in PREVIOUSLY_BACKUP_DIR (default var/backups)."""

from django.core.management.base import BaseCommand, CommandError

from memory.backups import BackupError, make_backup, prune


class Command(BaseCommand):
    help = "Copy the database into the backup folder (SQLite online backup or pg_dump), check it, prune old ones."

    def add_arguments(self, parser):
        parser.add_argument("--no-prune", action="store_true", help="keep backups older than PREVIOUSLY_BACKUP_KEEP_DAYS")

    def handle(self, *args, **options):
        try:
            backup = make_backup()
        except BackupError as error:
            raise CommandError(str(error)) from error
        removed = [] if options["no_prune"] else prune()
        self.stdout.write(f"backup {backup.path} ({backup.bytes:,} bytes, integrity ok), kept until "
                          f"{backup.expires_at:%Y-%m-%d %H:%M} UTC; removed {len(removed)} older backup(s)")
