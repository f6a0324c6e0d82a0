"""Evolution progress as events (K11, S2): stored on the run, logged on the slice, and sent
to the profile's open pages (`previously.push`), where the chat consumer forwards the HTML.

Message shape on the profile's group::

    {"type": "page.event", "html": "<rendered partial>",
     "event": "started|tool|finished|skipped|failed", "run_id": 7, "status": "running|…"}
"""

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator

from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import override

from memory.models import EvolutionRun, SliceLogEntry
from previously.i18n import for_profile
from previously.push import page_event, push

log = logging.getLogger(__name__)
_listeners: contextvars.ContextVar[tuple[Callable[[EvolutionRun, dict], None], ...]] = (
    contextvars.ContextVar("evolution_listeners", default=())
)


@contextlib.contextmanager
def listening(callback: Callable[[EvolutionRun, dict], None]) -> Iterator[None]:
    """Also hand every step emitted in this context to `callback` (e.g. a command's output)."""
    token = _listeners.set((*_listeners.get(), callback))
    try:
        yield
    finally:
        _listeners.reset(token)


def emit(run: EvolutionRun, event: str, **data) -> dict:
    """Record one step of a run and broadcast it; a broadcast failure never fails the run."""
    step = {"at": timezone.now().isoformat(), "event": event, **data}
    run.steps = [*run.steps, step]
    EvolutionRun.objects.filter(pk=run.pk).update(steps=run.steps)
    if run.slice_id:
        SliceLogEntry.objects.create(
            slice_id=run.slice_id,
            kind=SliceLogEntry.Kind.EVOLUTION,
            summary=_summary(run, event, data)[:500],
            data={"run_id": run.pk, **step},
        )
    for callback in _listeners.get():
        callback(run, step)
    with for_profile(run.profile):  # the indicator speaks the profile's language
        html = render_to_string(
            f"card/evolution.html#{event if event in PARTIALS else 'tool'}",
            {"run": run, "step": step, "event": event},
        )
    about = {"event": event, "run_id": run.pk, "status": run.status}
    try:
        push(run.profile_id, html, **about)
    except Exception:  # noqa: BLE001 - the page misses a frame; the run and its log stand
        log.exception("could not broadcast evolution event %s of run %s", event, run.pk)
    return page_event(html, **about)


PARTIALS = ("started", "tool", "review", "finished", "skipped", "failed")


def _summary(run: EvolutionRun, event: str, data: dict) -> str:
    if event == "started":
        with override("en"):  # the stored summary stays English; the labels are translated
            return f"evolution run {run.pk} started ({run.get_trigger_display()})"
    if event == "tool":
        verdict = "accepted" if data.get("accepted") else "refused"
        return f"{data.get('tool')} {verdict}: {data.get('result', '')}"
    if event == "review":
        return f"run {run.pk} reviews experiences {', '.join(data.get('experiences', []))}"
    if event == "finished":
        return f"run {run.pk} {run.status}: {run.summary}"
    if event == "skipped":
        return f"run {run.pk} skipped: {run.skip_reason}"
    if event == "failed":
        return f"run {run.pk} failed: {run.error}"
    return f"run {run.pk} {event}"
