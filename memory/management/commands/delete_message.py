"""Hide a message, or delete it for good (SPEC D1, D2): the command-line entry point.

Exit status: 0 deleted/hidden or already gone, 3 refused because records reference the
message (listed; pass --force to cascade), 1 not found or bad input.
"""

import sys

from django.core.management.base import BaseCommand, CommandError

from memory.deletion import HasRefs, MessageNotFound, delete_message
from memory.management.profiles import resolve_profile

EXIT_HAS_REFS = 3


class Command(BaseCommand):
    help = "Hide (default) or --hard delete one archived message; --force cascades to its references."

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, help="profile key, e.g. owner")
        parser.add_argument("--mid", required=True, help="message id, e.g. c_0123456789abcdef")
        parser.add_argument("--user", help="owner of the profile (default: the first superuser)")
        parser.add_argument("--hard", action="store_true", help="delete for good, leaving tombstones")
        parser.add_argument("--force", action="store_true", help="with --hard: also delete what references it")

    def handle(self, *args, **options):
        profile = resolve_profile(options["user"], options["profile"])
        try:
            result = delete_message(
                profile=profile, mid=options["mid"], hard=options["hard"], force=options["force"]
            )
        except MessageNotFound as e:
            raise CommandError(str(e)) from e
        except HasRefs as e:
            self.stderr.write(f"refused (has_refs): {len(e.refs)} record(s) reference {options['mid']}:")
            for ref in e.refs:
                self.stderr.write(f"  {ref['kind']:<4} {ref['id']}  {ref['text']}")
            self.stderr.write("Run again with --force to delete them too.")
            sys.exit(EXIT_HAS_REFS)
        self.stdout.write(f"{result.status}: {result.mid}")
        for kind, object_id in result.tombstones:
            self.stdout.write(f"  tombstone {kind} {object_id}")
        for eid in result.uncited:
            self.stdout.write(f"  experience {eid} lost this citation")
