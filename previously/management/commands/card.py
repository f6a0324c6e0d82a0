"""The card by hand: `card show`, `card evolve` (one run, synchronously), `card validate FILE`."""

import json
from datetime import date
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from memory.card.store import card_at, live_card
from memory.card.validate import violations
from memory.management.output import table
from memory.management.profiles import resolve_profile
from memory.models import EvolutionRun, Profile, Slice
from previously.agent.events import listening
from previously.agent.lifecycle import run_now


class Command(BaseCommand):
    help = "Show, evolve or validate a user card (SPEC K)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        show = sub.add_parser("show", help="Print a profile's card, now or at the end of a slice.")
        evolve = sub.add_parser("evolve", help="Run one evolution now against the configured model.")
        for p in (show, evolve):
            p.add_argument("--profile", required=True, help="Profile key, e.g. owner.")
            p.add_argument("--user", help="Username owning the profile (default: the first superuser).")
        show.add_argument("--at", help="Slice ref YYYY/MM/DD/HHMM: the card as it was when it ended.")
        evolve.add_argument("--slice", help="Slice ref YYYY/MM/DD/HHMM to review (default: the latest).")
        evolve.add_argument(
            "--trigger",
            choices=["explicit", "slice_close", "manual"],
            default="manual",
            help="slice_close asks the analyzer whether the slice is worth it first (default: manual).",
        )
        validate = sub.add_parser("validate", help="Check a card file; report every violation with its line.")
        validate.add_argument("file", help="Path to a card Markdown file.")
        validate.add_argument("--today", help="YYYY-MM-DD: also report stale Now / overdue Horizon items.")

    def handle(self, *args, action, **options):
        return getattr(self, f"_{action}")(**options) or None

    def _show(self, *, profile, user, at, **_):
        prof = resolve_profile(user, profile)
        if at:
            slice_ = _slice(prof, at)
            text = card_at(prof, slice_)
            if text is None:
                raise CommandError(f"no card was recorded at the end of slice {at}")
        else:
            text = live_card(prof).text
        self.stdout.write(text or "(empty card)\n", ending="")

    def _evolve(self, *, profile, user, slice, trigger, **_):
        prof = resolve_profile(user, profile)
        slice_ = _slice(prof, slice) if slice else prof.slices.order_by("-started_at").first()
        with listening(self._print_step):
            run = run_now(profile=prof, slice_=slice_, trigger=trigger)
        if run.status in (EvolutionRun.Status.CHANGED, EvolutionRun.Status.UNCHANGED):
            tools_used = [s for s in run.steps if s.get("event") == "tool"]
            accepted = sum(1 for s in tools_used if s.get("accepted"))
            self.stdout.write(table(
                ["run", "status", "tool calls", "accepted", "refused", "experience changes", "seconds"],
                [[run.pk, run.status, len(tools_used), accepted, len(tools_used) - accepted,
                  run.diff.split("experiences:\n", 1)[1].count("\n") + 1 if "experiences:\n" in run.diff else 0,
                  f"{(run.finished_at - run.started_at).total_seconds():.1f}" if run.started_at and run.finished_at else "—"]],
            ))
        if run.status == EvolutionRun.Status.CHANGED:
            self.stdout.write(f"summary: {run.summary}\n{run.diff}")
        elif run.status == EvolutionRun.Status.UNCHANGED:
            self.stdout.write(f"unchanged: {run.summary}")
        elif run.status == EvolutionRun.Status.SKIPPED:
            raise CommandError(f"run {run.pk} skipped: {run.skip_reason}")
        else:
            raise CommandError(f"run {run.pk} failed: {run.error}")

    def _print_step(self, run, step):
        detail = {k: v for k, v in step.items() if k not in ("at", "event")}
        self.stdout.write(f"[run {run.pk}] {step['event']} {json.dumps(detail, ensure_ascii=False)}")

    def _validate(self, *, file, today, **_):
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from exc
        try:
            day = date.fromisoformat(today) if today else None
        except ValueError as exc:
            raise CommandError(f"--today {today!r} is not YYYY-MM-DD") from exc
        found = violations(text, today=day)
        for v in found:
            self.stdout.write(f"{file}:{v}")
        errors = [v for v in found if v.severity == "error"]
        if errors:
            raise CommandError(f"{len(errors)} violation{'s' if len(errors) != 1 else ''} in {file}")
        self.stdout.write(self.style.SUCCESS(f"{file}: a valid v5 card"))


def _slice(profile: Profile, ref: str) -> Slice:
    slice_ = Slice.objects.for_profile(profile).by_ref(ref).first()
    if slice_ is None:
        raise CommandError(f"{profile} has no slice {ref}")
    return slice_
