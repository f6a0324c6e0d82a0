"""Announce due Horizon items (K15) — the server does this every PREVIOUSLY_PROACTIVE_CHECK_SECONDS."""

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from previously.chat.proactive import check_all


class Command(BaseCommand):
    help = (
        "Let the companion write first where a Horizon item of the card fell due: at most one "
        "message per profile per pass, within the daily limit, never mid-conversation."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Say what would be sent; write and send nothing.")
        parser.add_argument(
            "--now", metavar="ISO", help="Check as of this time (ISO 8601; without an offset, UTC), e.g. for tests."
        )

    def handle(self, *args, dry_run=False, now=None, **options):
        when = None
        if now:
            try:
                when = datetime.fromisoformat(now)
            except ValueError:
                raise CommandError(f"--now must be an ISO 8601 time such as 2026-03-02T09:00:00+08:00, not {now!r}") from None
            if timezone.is_naive(when):
                when = timezone.make_aware(when, timezone.UTC)
        outcomes = check_all(now=when, dry_run=dry_run)
        for outcome in outcomes:
            self.stdout.write(str(outcome))
        sent = sum(1 for o in outcomes if o.message is not None or (dry_run and not o.skipped))
        verb = "would send" if dry_run else "sent"
        self.stdout.write(self.style.SUCCESS(f"{verb} {sent} proactive message{'s' if sent != 1 else ''}"))
