"""Faults (issue 9, L3): a worker killed mid-evolution leaves the card untouched, the run
failed, and the run is retried once; SQLite busy under concurrent writers loses nothing."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from memory.archive import archive_message
from memory.models import Card, EvolutionRun, Message
from previously.agent.evolve import create_run
from previously.agent.lifecycle import INTERRUPTED, fail_stale_runs
from tests.factories import ProfileFactory
from tests.llm_server import Turn
from tests.previously.agent.helpers import make_slice, set_card

REF = "2026/08/17/0515"
CARD = "# Previously On\n"


def _killed_mid_run(run: EvolutionRun) -> None:
    """What a worker dying mid-loop leaves behind: the run claimed and running, nothing committed."""
    EvolutionRun.objects.filter(pk=run.pk).update(
        status=EvolutionRun.Status.RUNNING, attempts=1, card_before=CARD,
        started_at=timezone.now() - timedelta(hours=1),
    )


def test_a_run_whose_worker_died_is_failed_then_retried_once_and_lands(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "I'm Mei")])
    set_card(profile, CARD)
    run = create_run(profile=profile, slice_=slice_, trigger=EvolutionRun.Trigger.MANUAL)
    _killed_mid_run(run)
    assert Card.objects.get(profile=profile).text == CARD  # untouched by the dead attempt
    llm_server.script(
        Turn(tool_calls=[("set_identity", {"field": "Name", "value": "Mei", "refs": [REF]})]),
        Turn(tool_calls=[("finish", {"summary": "Recorded Mei's name."})]),
    )

    assert fail_stale_runs() == 1

    run.refresh_from_db()
    events = [s["event"] for s in run.steps]
    assert events[:2] == ["failed", "retry"] and "finished" in events
    assert run.status == EvolutionRun.Status.CHANGED and run.attempts == 2
    assert "Name: Mei" in Card.objects.get(profile=profile).text


def test_a_run_that_dies_again_after_its_retry_stays_failed_with_the_card_untouched(profile, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "hi")])
    set_card(profile, CARD)
    run = create_run(profile=profile, slice_=slice_, trigger=EvolutionRun.Trigger.MANUAL)
    EvolutionRun.objects.filter(pk=run.pk).update(steps=[{"event": "retry"}])
    _killed_mid_run(run)

    assert fail_stale_runs() == 1

    run.refresh_from_db()
    assert run.status == EvolutionRun.Status.FAILED and run.error == INTERRUPTED
    assert Card.objects.get(profile=profile).text == CARD
    assert fail_stale_runs() == 0  # failed runs are not picked up again


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_on_one_database_lose_and_duplicate_nothing():
    """Threads hammering archive_message (SQLite: IMMEDIATE + busy timeout + bounded retry)."""
    profile = ProfileFactory(key="owner")
    threads, per_thread = 6, 15
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def writer(n: int) -> None:
        try:
            barrier.wait(timeout=10)
            for k in range(per_thread):
                mid = f"c_{n:08x}{k:08x}"
                archive_message(profile=profile, mid=mid, speaker="user", content=f"line {n}/{k}")
                archive_message(profile=profile, mid=mid, speaker="user", content=f"line {n}/{k}")  # resend
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    pool = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    assert not errors, errors
    mids = list(Message.objects.filter(profile=profile).values_list("mid", flat=True))
    assert len(mids) == threads * per_thread == len(set(mids)), connection.vendor
