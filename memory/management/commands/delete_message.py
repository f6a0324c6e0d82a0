"""Hide a message, or delete it for good (SPEC D1, D2): the command-line entry point.

`--slice KEY` deletes a whole conversation for good instead of one line. After a deletion the
freed space is reclaimed: SQLite checkpoints its WAL; PostgreSQL runs VACUUM (D6).

Exit status: 0 deleted/hidden or already gone, 3 refused because records reference the
message (listed; pass --force to cascade), 1 not found or bad input.
"""

import sys

from django.core.management.base import BaseCommand, CommandError

from memory.deletion import HasRefs, MessageNotFound, delete_message, delete_slice, reclaim_space
from memory.management.profiles import resolve_profile
from memory.models import Slice

EXIT_HAS_REFS = 3


class Command(BaseCommand):
    help = "Hide (default) or --hard delete one archived message; --force cascades to its references."

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, help="profile key, e.g. owner")
        parser.add_argument("--mid", help="message id, e.g. c_0123456789abcdef")
        parser.add_argument("--slice", help="delete a whole conversation for good, e.g. 2026-08-17-0515")
        parser.add_argument("--user", help="owner of the profile (default: the first superuser)")
        parser.add_argument("--hard", action="store_true", help="delete for good, leaving tombstones")
        parser.add_argument("--force", action="store_true", help="with --hard: also delete what references it")
        parser.add_argument("--keep-replies", action="store_true",
                            help="keep the companion's replies that quote it, the quoted words as [deleted]")
        parser.add_argument("--drop-card-line", action="append", default=[], metavar="KEY",
                            help="also remove this card line citing the conversation (key as listed); repeatable")
        parser.add_argument("--no-vacuum", action="store_true",
                            help="on PostgreSQL, skip the VACUUM that reclaims the deleted rows")

    def handle(self, *args, **options):
        profile = resolve_profile(options["user"], options["profile"])
        if bool(options["mid"]) == bool(options["slice"]):
            raise CommandError("give exactly one of --mid or --slice")
        if options["slice"]:
            slice_ = Slice.objects.filter(profile=profile, key=options["slice"]).first()
            if slice_ is None:
                raise CommandError(f"slice {options['slice']} not found in profile {profile.key}")
            result = delete_slice(slice_, keep_replies=options["keep_replies"], drop_lines=options["drop_card_line"])
            self._report(result, options)
            return
        try:
            result = delete_message(
                profile=profile, mid=options["mid"], hard=options["hard"], force=options["force"],
                keep_replies=options["keep_replies"], drop_lines=options["drop_card_line"],
            )
        except MessageNotFound as e:
            raise CommandError(str(e)) from e
        except HasRefs as e:
            self.stderr.write(f"refused (has_refs): {len(e.refs)} record(s) reference {options['mid']}:")
            for ref in e.refs:
                self.stderr.write(f"  {ref['kind']:<4} {ref['id']}  {ref['text']}")
            self.stderr.write("Run again with --force to delete them too.")
            sys.exit(EXIT_HAS_REFS)
        self._report(result, options)

    def _report(self, result, options):
        self.stdout.write(f"{result.status}: {result.mid}")
        for kind, object_id in result.tombstones:
            self.stdout.write(f"  tombstone {kind} {object_id}")
        for eid in result.uncited:
            self.stdout.write(f"  experience {eid} lost this citation")
        for mid in result.replies_deleted:
            self.stdout.write(f"  reply {mid} quoted it: deleted too")
        for mid in result.replies_kept:
            self.stdout.write(f"  reply {mid} quoted it: kept, the quoted words now read [deleted]")
        for line in result.card_lines_removed:
            self.stdout.write(f"  card line removed: {line}")
        if result.status == "deleted":
            self.stdout.write(f"  space: {reclaim_space(vacuum=not options['no_vacuum'])}")
