"""Purge soft-deleted records for good, in batches, each leaving a tombstone (SPEC D4)."""

from datetime import datetime, time

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from memory.deletion import purge_soft_deleted
from memory.management import output
from memory.management.profiles import resolve_profile


class Command(BaseCommand):
    help = (
        "Hard-delete soft-deleted messages, highlights, experiences and relations with tombstones. "
        "A message's references go with it. Use --dry-run first."
    )

    def add_arguments(self, parser):
        parser.add_argument("--profile", help="only this profile key (of --user); default: all profiles")
        parser.add_argument("--user", help="owner of --profile (default: the first superuser)")
        parser.add_argument("--before", help="only rows soft-deleted before this date (YYYY-MM-DD, local time)")
        parser.add_argument("--batch", type=int, default=200, help="rows per transaction (default 200)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be purged; write nothing")

    def handle(self, *args, **options):
        profile = resolve_profile(options["user"], options["profile"]) if options["profile"] else None
        before = None
        if options["before"]:
            try:
                day = datetime.strptime(options["before"], "%Y-%m-%d").date()
            except ValueError as e:
                raise CommandError("--before must be a date like 2026-01-31") from e
            before = timezone.make_aware(datetime.combine(day, time.min))
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1")

        with output.progress(self.stdout) as progress:
            report = purge_soft_deleted(
                profile=profile, before=before, batch=options["batch"], dry_run=options["dry_run"], progress=progress
            )
        if report.dry_run:
            self.stdout.write("DRY RUN: nothing written")
        total = ["total", sum(report.selected.values()), sum(report.tombstones.values())]
        self.stdout.write(output.table(["kind", "selected", "tombstones"], report.rows(), total=total))
