"""K8: two runs on one profile at once lose nothing (row lock at commit + rebase)."""

import threading

import pytest
from django.db import connections

from memory.card import parse
from memory.models import Card, EvolutionRun
from previously.agent.evolve import create_run, execute_run
from previously.llm import Completion, ToolCall, reset_provider
from previously.llm.scripted import Scripted
from tests.factories import ProfileFactory, UserFactory
from tests.previously.agent.helpers import make_slice


class BarrierScripted(Scripted):
    """Holds its first call until the other run has read the card too."""

    def __init__(self, barrier: threading.Barrier, completions):
        super().__init__(completions=completions)
        self.barrier = barrier

    def complete(self, messages, *, tools=None, model=None, **options):
        if not self.requests:
            self.barrier.wait(timeout=10)
        return super().complete(messages, tools=tools, model=model)


def adding(text: str, ref: str):
    return [
        Completion("", [ToolCall("c1", "add_now", f'{{"text": "{text}", "refs": ["{ref}"], "since": "2026-08-17"}}')]),
        Completion("", [ToolCall("c2", "finish", f'{{"summary": "Noted {text}."}}')]),
    ]


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_runs_on_one_profile_both_land():
    profile = ProfileFactory(user=UserFactory())
    first = make_slice(profile, "2026-08-17-0515", lines=[("user", "I run now")])
    second = make_slice(profile, "2026-08-17-0930", lines=[("user", "I paint now")])
    runs = [
        create_run(profile=profile, slice_=first, trigger="manual"),
        create_run(profile=profile, slice_=second, trigger="manual"),
    ]
    barrier = threading.Barrier(2)
    providers = [
        BarrierScripted(barrier, adding("Running", first.ref)),
        BarrierScripted(barrier, adding("Painting", second.ref)),
    ]
    reset_provider(Scripted())  # agent_model() asks the process's provider for a name
    results = {}

    def work(k):
        try:
            results[k] = execute_run(runs[k].pk, provider=providers[k])
        finally:
            connections.close_all()

    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        reset_provider(None)

    assert {r.status for r in results.values()} == {EvolutionRun.Status.CHANGED}
    stored = Card.objects.get(profile=profile)
    assert stored.version == 2
    assert sorted(n.text for n in parse(stored.text).now) == ["Painting", "Running"]
    rebased = [r for r in results.values() if r.steps[-1].get("rebased")]
    assert len(rebased) == 1
