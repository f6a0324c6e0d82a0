"""The embedded task backend runs tasks on a worker thread, off the caller's path (K11)."""

import threading
import time

import pytest
from django.tasks import TaskResultStatus, task

from previously.task_backend import ThreadPoolBackend

_seen: dict = {}


@task()
def record_thread(tag: str) -> str:
    _seen[tag] = threading.current_thread().name
    return tag


@pytest.mark.django_db(transaction=True)
def test_tasks_run_on_a_worker_thread_and_report_their_result():
    backend = ThreadPoolBackend("default", {"OPTIONS": {"MAX_WORKERS": 1}})

    result = backend.enqueue(record_thread, ("a",), {})
    deadline = time.monotonic() + 5
    while not backend.get_result(result.id).is_finished and time.monotonic() < deadline:
        time.sleep(0.01)

    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == "a"
    assert _seen["a"].startswith("previously-task")
    backend.close()


@pytest.mark.django_db(transaction=True)
def test_a_task_enqueued_in_a_transaction_starts_after_commit():
    from django.db import transaction

    backend = ThreadPoolBackend("default", {})
    with transaction.atomic():
        result = backend.enqueue(record_thread, ("b",), {})
        time.sleep(0.1)
        assert result.status == TaskResultStatus.READY
    deadline = time.monotonic() + 5
    while not result.is_finished and time.monotonic() < deadline:
        time.sleep(0.01)
    assert result.status == TaskResultStatus.SUCCESSFUL
    backend.close()


@pytest.mark.django_db(transaction=True)
def test_an_explicit_request_never_delays_the_reply(settings, llm_server, llm_provider):
    """K11: with the embedded backend, after_reply returns before the slow run finishes."""
    from memory.models import EvolutionRun
    from previously.agent.lifecycle import after_reply
    from tests.factories import ProfileFactory, UserFactory
    from tests.llm_server import Turn
    from tests.previously.agent.helpers import make_slice

    settings.TASKS = {"default": {"BACKEND": "previously.task_backend.ThreadPoolBackend"}}
    profile = ProfileFactory(user=UserFactory())
    slice_ = make_slice(profile, closed=False, lines=[("user", "remember I moved")])
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "Nothing yet."})], delay=1.0))

    started = time.monotonic()
    verdict = after_reply(profile, slice_, "remember I moved", "Noted!")
    assert time.monotonic() - started < 0.5

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        run = EvolutionRun.objects.get(pk=verdict.run.pk)
        if run.status not in ("queued", "running"):
            break
        time.sleep(0.05)
    assert run.status == "unchanged"
