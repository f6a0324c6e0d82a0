"""Make or update a companion from a SillyTavern character card (SPEC H2): a V2/V3 PNG or the
card's JSON. `--profile KEY` updates that companion (created if missing); without it, the card
makes a companion, or updates the one the same card made before."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from memory.interop.character_card import CardRefused, import_character_card
from memory.management.profiles import resolve_user


class Command(BaseCommand):
    help = "Make or update a companion from a character card (PNG with a chara/ccv3 chunk, or JSON)."

    def add_arguments(self, parser):
        parser.add_argument("path", help="The card file: a PNG or a .json.")
        parser.add_argument("--user", help="Username the companion belongs to (default: the first superuser).")
        parser.add_argument("--profile", help="Companion key to update (created if missing).")
        parser.add_argument("--dry-run", action="store_true", help="Say what would change; write nothing.")
        parser.add_argument("--report-json", help="Also write the report as JSON to this file.")

    def handle(self, *args, path, user, profile, dry_run, report_json, **options):
        owner = resolve_user(user)
        try:
            report = import_character_card(Path(path), user=owner, profile_key=profile, dry_run=dry_run)
        except CardRefused as exc:
            raise CommandError(str(exc)) from exc
        verb = "would " if dry_run else ""
        what = "make" if report.created else "update"
        self.stdout.write(
            f"{report.file}: {report.card_name} ({report.spec}) — {verb}{what} companion {report.profile_key!r}; "
            f"changes: {', '.join(report.changes) or 'none'}; persona {report.persona_chars:,} characters; "
            f"lorebook {report.lore_entries} entries ({report.lore_enabled} enabled); "
            f"greetings {report.greetings}{' (' + report.greetings_skipped + ')' if report.greetings_skipped else ''}; "
            f"avatar {'yes' if report.avatar else 'no'}"
        )
        if report.kept_unused:
            self.stdout.write(f"kept but not used in the prompt: {', '.join(report.kept_unused)}")
        if report_json:
            Path(report_json).write_text(json.dumps(report.as_dict(), ensure_ascii=False, indent=2), encoding="utf-8")
