"""Close idle slices (S1) and queue their evolution runs — the server does this every minute."""

from django.core.management.base import BaseCommand

from previously.agent.lifecycle import close_idle_slices, fail_stale_runs


class Command(BaseCommand):
    help = "Close every slice idle longer than PREVIOUSLY_SLICE_GAP_MINUTES and queue its evolution run."

    def handle(self, *args, **options):
        closed = close_idle_slices()
        for slice_ in closed:
            self.stdout.write(f"closed {slice_.profile.user}/{slice_.profile.key} {slice_.ref}")
        stale = fail_stale_runs()
        self.stdout.write(
            self.style.SUCCESS(
                f"closed {len(closed)} idle slice{'s' if len(closed) != 1 else ''};"
                f" marked {stale} interrupted run{'s' if stale != 1 else ''} failed"
            )
        )
