"""Where evolution runs start (K8, K10, S1) — the one module that queues them.

A run starts when a slice closes (the snapshot is taken by `memory.slices`; the analyzer's
"worth it?" gate runs inside the run, off the path), when the user asks for a new
conversation, when the idle check closes slices, when a turn holds an explicit memory
request or correction (the rules at once; the model's look as the `analyze_turn` task), and
once more for a run a dead process left behind (`fail_stale_runs`).

`archive_line` is the one entry point that archives a line and handles the slice it closed;
the chat consumer, the no-JavaScript upload and proactive sends all go through it.
"""

from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.tasks import task
from django.utils import timezone

from memory import slices
from memory.archive import Archived
from memory.models import EvolutionRun, Profile, Slice
from previously.agent.analyzer import (
    Verdict,
    card_needs_migration,
    detect_request,
    log_request,
    model_verdict,
    wants_model_look,
)
from previously.agent.events import emit
from previously.agent.evolve import create_run, evolve_card, execute_run

# --- starting a run ----------------------------------------------------------------------------


def start_run(
    *, profile: Profile, slice_: Slice | None, trigger: str, note: str = "", request: str = ""
) -> EvolutionRun:
    """Record a queued run and hand it to the task backend (never runs on the caller's path)."""
    run = create_run(profile=profile, slice_=slice_, trigger=trigger, note=note, request=request)
    evolve_card.enqueue(run.pk)
    return run


# --- slices closing ----------------------------------------------------------------------------


def archive_line[**P](write: Callable[P, Archived | None], *args: P.args, **kwargs: P.kwargs) -> Archived | None:
    """Archive one line with `write` (`memory.archive.archive_message`,
    `memory.images.store_image_message`, `memory.proactive.record_proactive`, …) and, when it
    closed the slice before it (S1), snapshot that slice and queue its evolution (K8, K10)."""
    archived = write(*args, **kwargs)
    if archived is not None and archived.closed_slice is not None:
        slice_closed(archived.closed_slice)
    return archived


def slice_closed(slice_: Slice) -> EvolutionRun:
    """Call when a slice has closed (e.g. `archive_message(...).closed_slice`): snapshot + run."""
    slices.on_closed(slice_)
    return _evolve_closed(slice_)


def _evolve_closed(slice_: Slice) -> EvolutionRun:
    # K10: a card in an older format forces a run (migration), without asking the analyzer.
    trigger = (
        EvolutionRun.Trigger.MIGRATION
        if card_needs_migration(slice_.profile)
        else EvolutionRun.Trigger.SLICE_CLOSE
    )
    return start_run(profile=slice_.profile, slice_=slice_, trigger=trigger)


def new_conversation(profile: Profile) -> Slice | None:
    """The user's "new conversation" action: close the open slice (S1) and evolve from it."""
    closed = slices.close_current_slice(profile)
    if closed is not None:
        _evolve_closed(closed)
    return closed


def close_idle_slices(*, now: datetime | None = None) -> list[Slice]:
    """The periodic check (S1): close idle slices, each followed by its evolution run."""
    closed = slices.close_idle_slices(now=now)
    for slice_ in closed:
        _evolve_closed(slice_)
    return closed


# --- explicit requests (K10 trigger 2) ---------------------------------------------------------


def after_reply(profile: Profile, slice_: Slice, user_text: str, reply_text: str) -> Verdict:
    """Called by the chat after each reply: an explicit request starts a run at once (K10).

    Never blocks: the rules take microseconds; the run, and the model's own look at the
    turn (when a model is configured and the rules found nothing), go to the task backend.
    """
    verdict = detect_request(user_text)
    if verdict.explicit:
        return _explicit(profile, slice_, user_text, verdict)
    if wants_model_look():
        analyze_turn.enqueue(slice_.pk, user_text, reply_text)
    return verdict


@task()
def analyze_turn(slice_id: int, user_text: str, reply_text: str) -> bool:
    """The model-based turn analyzer, off the reply path; True when it started a run."""
    return analyze_turn_with_model(slice_id, user_text, reply_text)


def analyze_turn_with_model(slice_id: int, user_text: str, reply_text: str) -> bool:
    """The model's look at one turn (the `analyze_turn` task); True when it started a run."""
    slice_ = Slice.objects.select_related("profile").get(pk=slice_id)
    verdict = model_verdict(slice_, user_text, reply_text)
    if not verdict.explicit:
        return False
    _explicit(slice_.profile, slice_, user_text, verdict)
    return True


def _explicit(profile: Profile, slice_: Slice, user_text: str, verdict: Verdict) -> Verdict:
    log_request(slice_, verdict)
    run = start_run(
        profile=profile, slice_=slice_, trigger=EvolutionRun.Trigger.EXPLICIT, request=user_text
    )
    return Verdict(True, verdict.kind, verdict.reason, verdict.source, run)


# --- runs a dead process left behind, and runs by hand -----------------------------------------------------------

INTERRUPTED = "interrupted before it finished — the card is unchanged"
RETRIES = 1  # a run its worker died under is queued again once, then left failed


def fail_stale_runs(*, older_than: timedelta = timedelta(minutes=15)) -> int:
    """Runs a dead process left queued or running are marked failed (their card is
    untouched: nothing is written before the final commit) and queued again once."""
    cutoff = timezone.now() - older_than
    stale = EvolutionRun.objects.filter(
        Q(status=EvolutionRun.Status.QUEUED, created_at__lt=cutoff)
        | Q(status=EvolutionRun.Status.RUNNING, started_at__lt=cutoff)
        | Q(status=EvolutionRun.Status.RUNNING, started_at__isnull=True, created_at__lt=cutoff)
    )
    count = 0
    for run in stale:
        with transaction.atomic():
            updated = EvolutionRun.objects.filter(pk=run.pk, status=run.status).update(
                status=EvolutionRun.Status.FAILED, error=INTERRUPTED, finished_at=timezone.now()
            )
        if not updated:
            continue  # it finished (or another checker took it) meanwhile
        count += 1
        run.refresh_from_db()
        emit(run, "failed", error=INTERRUPTED)
        retried = sum(1 for s in run.steps if s.get("event") == "retry")
        if retried < RETRIES:
            run.steps = [*run.steps, {"at": timezone.now().isoformat(), "event": "retry", "attempts": run.attempts}]
            run.status, run.error, run.finished_at = EvolutionRun.Status.QUEUED, "", None
            run.save(update_fields=["steps", "status", "error", "finished_at"])
            evolve_card.enqueue(run.pk)
    return count


def run_now(*, profile: Profile, slice_: Slice | None, trigger: str) -> EvolutionRun:
    """A run carried out on the caller's path (`manage.py card evolve`), not queued."""
    run = create_run(profile=profile, slice_=slice_, trigger=trigger)
    return execute_run(run.pk)


# --- catching up on history (H3) -----------------------------------------------------------------


def catch_up_run(*, profile: Profile, slice_: Slice) -> EvolutionRun:
    """One slice of a catch-up (`previously.agent.catch_up`), carried out on the caller's path:
    the catch-up goes one slice at a time, oldest first, so each run sees the card the one
    before it left."""
    run = create_run(profile=profile, slice_=slice_, trigger=EvolutionRun.Trigger.CATCH_UP)
    return execute_run(run.pk)
