"""The card by hand: `card show`, `card evolve` (one run, synchronously), `card validate FILE`,
`card catch_up` (the agent over the closed slices, oldest first; H3)."""

import json
from datetime import date
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext, ngettext, pgettext_lazy

from memory.card.store import card_at, live_card
from memory.card.validate import violations
from memory.management import output
from memory.management.output import table
from memory.management.profiles import resolve_profile
from memory.models import CatchUp, EvolutionRun, Profile, Slice
from previously.agent import catch_up
from previously.agent.events import listening
from previously.agent.lifecycle import run_now
from previously.pages.slices.log_lines import known

RUN_HEADERS = (
    pgettext_lazy("card run table", "run"),
    pgettext_lazy("card run table", "status"),
    pgettext_lazy("card run table", "tool calls"),
    pgettext_lazy("card run table", "accepted"),
    pgettext_lazy("card run table", "refused"),
    pgettext_lazy("card run table", "experience changes"),
    pgettext_lazy("card run table", "seconds"),
)


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
        catch = sub.add_parser(
            "catch_up", help="Run the agent over the companion's closed slices not yet evolved, oldest first (H3)."
        )
        catch.add_argument("--profile", required=True, help="Profile key, e.g. owner.")
        catch.add_argument("--user", help="Username owning the profile (default: the first superuser).")
        catch.add_argument("--since", help="YYYY-MM-DD: only slices that started on or after this day.")
        catch.add_argument("--max-slices", type=int, help="At most this many runs (default: all).")
        catch.add_argument("--dry-run", action="store_true", help="Only show the runs and the estimate.")
        catch.add_argument("--stop", action="store_true", help="Ask a running catch-up (e.g. the page's) to stop.")
        validate = sub.add_parser("validate", help="Check a card file; report every violation with its line.")
        validate.add_argument("file", help="Path to a card Markdown file.")
        validate.add_argument("--today", help="YYYY-MM-DD: also report stale Now / overdue Horizon items.")
        for p in (show, evolve, catch, validate):
            output.add_language_argument(p)

    def handle(self, *args, action, language=None, **options):
        with output.in_language(language):
            return getattr(self, f"_{action}")(**options) or None

    def _show(self, *, profile, user, at, **_):
        prof = resolve_profile(user, profile)
        if at:
            slice_ = _slice(prof, at)
            text = card_at(prof, slice_)
            if text is None:
                raise CommandError(gettext("no card was recorded at the end of slice %(ref)s") % {"ref": at})
        else:
            text = live_card(prof).text
        self.stdout.write(text or gettext("(empty card)") + "\n", ending="")

    def _evolve(self, *, profile, user, slice, trigger, **_):
        prof = resolve_profile(user, profile)
        slice_ = _slice(prof, slice) if slice else prof.slices.order_by("-started_at").first()
        with listening(self._print_step):
            run = run_now(profile=prof, slice_=slice_, trigger=trigger)
        if run.status in (EvolutionRun.Status.CHANGED, EvolutionRun.Status.UNCHANGED):
            tools_used = [s for s in run.steps if s.get("event") == "tool"]
            accepted = sum(1 for s in tools_used if s.get("accepted"))
            self.stdout.write(table(
                [str(h) for h in RUN_HEADERS],
                [[run.pk, run.get_status_display(), len(tools_used), accepted, len(tools_used) - accepted,
                  run.diff.split("experiences:\n", 1)[1].count("\n") + 1 if "experiences:\n" in run.diff else 0,
                  f"{(run.finished_at - run.started_at).total_seconds():.1f}" if run.started_at and run.finished_at else "—"]],
            ))
        if run.status == EvolutionRun.Status.CHANGED:
            self.stdout.write(gettext("summary: %(summary)s") % {"summary": known(run.summary)} + f"\n{run.diff}")
        elif run.status == EvolutionRun.Status.UNCHANGED:
            self.stdout.write(gettext("unchanged: %(summary)s") % {"summary": known(run.summary)})
        elif run.status == EvolutionRun.Status.SKIPPED:
            raise CommandError(gettext("run %(run)s skipped: %(reason)s") % {"run": run.pk, "reason": known(run.skip_reason)})
        else:
            raise CommandError(gettext("run %(run)s failed: %(error)s") % {"run": run.pk, "error": known(run.error)})

    def _catch_up(self, *, profile, user, since, max_slices, dry_run, stop, **_):
        prof = resolve_profile(user, profile)
        if stop:
            stopped = catch_up.stop(prof)
            self.stdout.write(gettext("catch-up %(status)s") % {"status": stopped.get_status_display()} if stopped
                              else gettext("no catch-up is running"))
            return
        try:
            day = date.fromisoformat(since) if since else None
        except ValueError as exc:
            raise CommandError(gettext("--since %(value)s is not YYYY-MM-DD") % {"value": repr(since)}) from exc
        if max_slices is not None and max_slices < 1:
            raise CommandError(gettext("--max-slices must be at least 1"))
        found = catch_up.plan(prof, since=day, max_slices=max_slices)
        self.stdout.write(ngettext(
            "%(runs)s run (slices %(first)s … %(last)s); about %(calls)s model calls (at most %(most)s) and %(tokens)s"
            " tokens sent",
            "%(runs)s runs (slices %(first)s … %(last)s); about %(calls)s model calls (at most %(most)s) and %(tokens)s"
            " tokens sent", found.runs) % {
            "runs": found.runs, "first": found.first.ref if found.first else "—",
            "last": found.last.ref if found.last else "—", "calls": f"{found.calls_expected:,}",
            "most": f"{found.calls_at_most:,}", "tokens": f"{found.tokens_expected:,}"})
        if found.offline:
            raise CommandError(gettext("no model is configured (PREVIOUSLY_LLM_BASE_URL): nothing was run"))
        if dry_run or not found.runs:
            return
        try:
            done = catch_up.run_here(prof, since=day, max_slices=max_slices, progress=self._print_catch_up)
        except (catch_up.NoModel, catch_up.AlreadyRunning) as exc:
            raise CommandError(str(exc)) from exc
        except KeyboardInterrupt:
            raise CommandError(gettext("stopped; run the same command again to resume (evolved slices are skipped)")) from None
        line = gettext("catch-up %(status)s: %(done)s runs done, %(failed)s failed") % {
            "status": done.get_status_display(), "done": done.done, "failed": done.failed}
        self.stdout.write(line + (f": {known(done.error)}" if done.error else ""))
        if done.status == CatchUp.Status.FAILED:
            raise CommandError(done.error)

    def _print_catch_up(self, progress, run):
        ref = run.slice.ref if run.slice else "—"
        said = known(run.summary or run.skip_reason or run.error)
        self.stdout.write(f"[{progress.done + progress.failed}/{progress.planned}] {ref} {run.get_status_display()}: {said}")

    def _print_step(self, run, step):
        detail = {k: v for k, v in step.items() if k not in ("at", "event")}
        self.stdout.write(f"[run {run.pk}] {step['event']} {json.dumps(detail, ensure_ascii=False)}")

    def _validate(self, *, file, today, **_):
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(gettext("cannot read %(file)s: %(error)s") % {"file": file, "error": exc.strerror}) from exc
        try:
            day = date.fromisoformat(today) if today else None
        except ValueError as exc:
            raise CommandError(gettext("--today %(value)s is not YYYY-MM-DD") % {"value": repr(today)}) from exc
        found = violations(text, today=day)
        for v in found:
            self.stdout.write(f"{file}:{v}")
        errors = [v for v in found if v.severity == "error"]
        if errors:
            raise CommandError(ngettext("%(n)s violation in %(file)s", "%(n)s violations in %(file)s", len(errors)) % {
                "n": len(errors), "file": file})
        self.stdout.write(self.style.SUCCESS(gettext("%(file)s: a valid v5 card") % {"file": file}))


def _slice(profile: Profile, ref: str) -> Slice:
    slice_ = Slice.objects.for_profile(profile).by_ref(ref).first()
    if slice_ is None:
        raise CommandError(gettext("%(profile)s has no slice %(ref)s") % {"profile": profile, "ref": ref})
    return slice_
