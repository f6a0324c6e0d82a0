"""Remove expired tombstones (SPEC D5); until they expire they block re-import."""

from django.core.management.base import BaseCommand

from memory.deletion import prune_tombstones


class Command(BaseCommand):
    help = "Delete tombstones whose expires_at has passed (TTL: PREVIOUSLY_TOMBSTONE_TTL_DAYS)."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="count expired tombstones; delete nothing")

    def handle(self, *args, **options):
        count = prune_tombstones(dry_run=options["dry_run"])
        verb = "would remove" if options["dry_run"] else "removed"
        self.stdout.write(f"{verb} {count} expired tombstone(s)")
