"""The card catches up on history (SPEC H3): the Previously Agent over a companion's closed
slices, oldest first, one run per slice through `lifecycle.catch_up_run`, so the card,
experiences and relations are built from the (imported) history with refs to its slices.

- `plan` counts the runs and estimates model calls and tokens before anything starts;
- `start` records a `CatchUp` and queues its first step; each step evolves one slice and queues
  the next (a worker thread is never held for the whole history); `run_here` does the same on
  the caller's path (`manage.py card catch_up`);
- `stop` asks it to stop after the run in progress; starting again resumes: slices already
  evolved (a finished run, or the analyzer's "nothing worth keeping") are skipped;
- with no model configured nothing starts (`NoModel`).
"""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, IntegerField, OuterRef, Q, Sum
from django.db.models.functions import Coalesce, Length
from django.tasks import task
from django.utils import timezone
from django.utils.translation import gettext

from memory.card.store import live_card
from memory.models import CatchUp, EvolutionRun, Message, Profile, Slice
from memory.recall.budget import approx_tokens
from previously.agent import tools
from previously.agent.evolve import NO_MODEL, NOTHING_WORTH_KEEPING, SYSTEM_PROMPT
from previously.agent.lifecycle import catch_up_run
from previously.llm.select import provider_for

EXPECTED_CALLS = 4  # per run: the analyzer's look, about two card edits and finish, the review
SAMPLE_LINES = 400
INTERRUPTED = "stopped by the person (Ctrl+C) — the card is unchanged"  # lines read to learn how many tokens a character of this history costs


class NoModel(Exception):
    """No model is configured: a catch-up would only record skipped runs."""


class AlreadyRunning(Exception):
    """This companion's catch-up is running; stop it first."""


def evolved_slices():
    """Slices the agent already looked at: a finished run, the analyzer's "nothing worth
    keeping", or a run queued or under way."""
    done = EvolutionRun.objects.filter(slice=OuterRef("pk")).filter(
        Q(status__in=[EvolutionRun.Status.CHANGED, EvolutionRun.Status.UNCHANGED,
                      EvolutionRun.Status.QUEUED, EvolutionRun.Status.RUNNING])
        | Q(status=EvolutionRun.Status.SKIPPED, skip_reason=NOTHING_WORTH_KEEPING)
    )
    return Exists(done)


def pending(profile: Profile, *, since: date | None = None, attempted_after=None):
    """The closed slices still to catch up on, oldest first (those with live lines only)."""
    qs = (
        Slice.objects.for_profile(profile).closed().annotate(evolved=evolved_slices()).filter(evolved=False)
        .filter(Exists(Message.objects.live().filter(slice=OuterRef("pk"))))
    )
    if since is not None:
        qs = qs.filter(started_at__date__gte=since)
    if attempted_after is not None:  # a slice this catch-up already tried (and failed) is not tried again
        qs = qs.exclude(Exists(EvolutionRun.objects.filter(
            slice=OuterRef("pk"), trigger=EvolutionRun.Trigger.CATCH_UP, created_at__gte=attempted_after)))
    return qs.order_by("started_at", "id")


@dataclass(frozen=True)
class Plan:
    runs: int
    calls_expected: int
    calls_at_most: int
    tokens_expected: int  # tokens sent to the model, about
    first: Slice | None
    last: Slice | None
    offline: bool

    def as_dict(self) -> dict:
        return {"runs": self.runs, "calls_expected": self.calls_expected, "calls_at_most": self.calls_at_most,
                "tokens_expected": self.tokens_expected, "first": self.first.key if self.first else None,
                "last": self.last.key if self.last else None, "offline": self.offline}


def plan(profile: Profile, *, since: date | None = None, max_slices: int | None = None) -> Plan:
    """How many runs a catch-up would make, and about how many model calls and tokens (H3)."""
    slices = pending(profile, since=since)
    if max_slices:
        slices = slices[:max_slices]
    sizes = list(
        slices.annotate(
            chars=Coalesce(Sum(Length("messages__content"), filter=Q(messages__deleted_at__isnull=True)), 0,
                           output_field=IntegerField()),
            # A slice without a live line of the person's is skipped before any model call
            # (the analyzer's gate): it is a run, but costs nothing.
            talked=Exists(Message.objects.live().filter(slice=OuterRef("pk"), speaker=Message.Speaker.USER)),
        ).values_list("pk", "chars", "talked")
    )
    runs = len(sizes)
    called = sum(1 for _, _, talked in sizes if talked)
    per_char = _tokens_per_char(profile)
    overhead = (approx_tokens(SYSTEM_PROMPT) + approx_tokens(json.dumps(tools.schemas(tools.CARD_PHASE)))
                + approx_tokens(live_card(profile).text))
    transcript = sum(min(chars, tools.TRANSCRIPT_MAX_CHARS) for _, chars, talked in sizes if talked) * per_char
    steps = settings.PREVIOUSLY_AGENT_MAX_STEPS
    first = Slice.objects.filter(pk=sizes[0][0]).first() if sizes else None
    last = Slice.objects.filter(pk=sizes[-1][0]).first() if sizes else None
    return Plan(
        runs=runs, calls_expected=called * EXPECTED_CALLS, calls_at_most=called * (1 + 2 * steps),
        tokens_expected=round(EXPECTED_CALLS * (called * overhead + transcript)),
        first=first, last=last, offline=provider_for(profile).offline,
    )


def _tokens_per_char(profile: Profile) -> float:
    sample = list(Message.objects.for_profile(profile).live().order_by("-id").values_list("content", flat=True)[:SAMPLE_LINES])
    chars = sum(len(t) for t in sample)
    return sum(approx_tokens(t) for t in sample) / chars if chars else 0.3


def active(profile: Profile) -> CatchUp | None:
    return CatchUp.objects.filter(profile=profile, status__in=[CatchUp.Status.RUNNING, CatchUp.Status.STOPPING]).first()


def latest(profile: Profile) -> CatchUp | None:
    return CatchUp.objects.filter(profile=profile).order_by("-created_at", "-id").first()


def begin(profile: Profile, *, since: date | None = None, max_slices: int | None = None) -> CatchUp:
    """Record a running catch-up (refused offline, or while another runs)."""
    if provider_for(profile).offline:
        raise NoModel(gettext("No model is configured, so the card cannot catch up; nothing was started."))
    planned = plan(profile, since=since, max_slices=max_slices).runs
    try:
        with transaction.atomic():
            return CatchUp.objects.create(profile=profile, since=since, max_slices=max_slices, planned=planned)
    except IntegrityError:
        raise AlreadyRunning(gettext("This companion’s card is already catching up; stop it first.")) from None


def start(profile: Profile, *, since: date | None = None, max_slices: int | None = None) -> CatchUp:
    """Begin a catch-up and queue its first step (the page's button)."""
    catch_up = begin(profile, since=since, max_slices=max_slices)
    catch_up_step.enqueue(catch_up.pk)
    return catch_up


def stop(profile: Profile) -> CatchUp | None:
    """Ask the running catch-up to stop after its run in progress; with no run in progress (between
    two steps, or its process died), or asked a second time, it is marked stopped at once."""
    current = active(profile)
    if current is None:
        return None
    in_progress = EvolutionRun.objects.filter(
        profile=profile, trigger=EvolutionRun.Trigger.CATCH_UP,
        status__in=[EvolutionRun.Status.QUEUED, EvolutionRun.Status.RUNNING],
    ).exists()
    if current.status == CatchUp.Status.RUNNING and in_progress:
        CatchUp.objects.filter(pk=current.pk, status=CatchUp.Status.RUNNING).update(status=CatchUp.Status.STOPPING)
    else:
        _end(current, CatchUp.Status.STOPPED)
    current.refresh_from_db()
    return current


def _end(catch_up: CatchUp, status: str, error: str = "") -> None:
    CatchUp.objects.filter(pk=catch_up.pk).update(status=status, error=error, finished_at=timezone.now(), current=None)
    catch_up.status, catch_up.error = status, error


def step(catch_up_id: int) -> EvolutionRun | None:
    """Evolve the next slice of this catch-up; None when it has ended (finished, stopped, failed)."""
    catch_up = CatchUp.objects.select_related("profile").get(pk=catch_up_id)
    if catch_up.status == CatchUp.Status.STOPPING:
        _end(catch_up, CatchUp.Status.STOPPED)
        return None
    if catch_up.status != CatchUp.Status.RUNNING:
        return None
    tried = catch_up.done + catch_up.failed
    next_slice = None
    if not catch_up.max_slices or tried < catch_up.max_slices:
        next_slice = pending(catch_up.profile, since=catch_up.since, attempted_after=catch_up.created_at).first()
    if next_slice is None:
        _end(catch_up, CatchUp.Status.FINISHED)
        return None
    CatchUp.objects.filter(pk=catch_up.pk).update(current=next_slice)
    run = catch_up_run(profile=catch_up.profile, slice_=next_slice)
    if run.status == EvolutionRun.Status.SKIPPED and run.skip_reason == NO_MODEL:
        _end(catch_up, CatchUp.Status.FAILED, gettext("No model is configured, so the card cannot catch up."))
        return None
    ok = run.status != EvolutionRun.Status.FAILED
    CatchUp.objects.filter(pk=catch_up.pk).update(
        done=catch_up.done + ok, failed=catch_up.failed + (not ok), current=None
    )
    return run


_here = threading.local()


@task()
def catch_up_step(catch_up_id: int) -> None:
    """One step, then the next one queued. On a backend that runs a task where it is queued
    (`immediate`), the steps loop here instead of nesting one call per slice."""
    if getattr(_here, "stepping", False):
        _here.again = True
        return
    _here.stepping = True
    try:
        while True:
            _here.again = False
            if step(catch_up_id) is not None:
                catch_up_step.enqueue(catch_up_id)
            if not _here.again:
                return
    finally:
        _here.stepping = False


def run_here(
    profile: Profile, *, since: date | None = None, max_slices: int | None = None,
    progress: Callable[[CatchUp, EvolutionRun], None] | None = None,
) -> CatchUp:
    """A whole catch-up on the caller's path (`manage.py card catch_up`); Ctrl+C stops it after
    the run in progress is recorded failed, and running it again resumes."""
    catch_up = begin(profile, since=since, max_slices=max_slices)
    try:
        while (run := step(catch_up.pk)) is not None:
            if progress is not None:
                catch_up.refresh_from_db()
                progress(catch_up, run)
    except KeyboardInterrupt:
        # The run cut short is recorded failed (the card untouched), not left for the idle
        # check to queue again outside the catch-up; the next catch-up tries its slice again.
        EvolutionRun.objects.filter(
            profile=profile, trigger=EvolutionRun.Trigger.CATCH_UP, status=EvolutionRun.Status.RUNNING
        ).update(status=EvolutionRun.Status.FAILED, error=INTERRUPTED, finished_at=timezone.now())
        _end(catch_up, CatchUp.Status.STOPPED)
        raise
    catch_up.refresh_from_db()
    return catch_up
