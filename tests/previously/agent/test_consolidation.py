"""The agent keeps experiences current (issue 19): the review after a card evolution on a closed
slice, its tools' refusals reaching the model, the run's summary and diff, read_slice_log, the
run's time budget. Against the local OpenAI-compatible server (real HTTP, real SDK)."""

import json
from datetime import UTC, datetime

import pytest
from django.template.loader import render_to_string

from memory.curation import propose_experience
from memory.models import EvolutionRun, Experience, ExperienceHistory, Message, SliceLogEntry
from previously.agent.events import listening
from previously.agent.evolve import create_run, execute_run
from previously.agent.tools import CARD_PHASE, EXPERIENCE_PHASE, REGISTRY, schemas
from tests.llm_server import Turn
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db

T1 = datetime(2026, 9, 20, 18, 0, tzinfo=UTC)


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request["tools"]]


def first_user_mid(slice_) -> str:
    return Message.objects.in_slice(slice_).filter(speaker="user").order_by("created_at").first().mid


@pytest.fixture
def berlin(profile):
    old = make_slice(profile, lines=[("user", "I live in Berlin 我住在柏林")])
    exp = propose_experience(
        profile=profile, title="Lives in Berlin", content="They live in Berlin", source_mids=[first_user_mid(old)]
    )
    exp.confirm(actor="agent")
    return exp


def test_after_the_card_the_agent_reviews_experiences_and_invalidates_a_superseded_one(profile, berlin, llm_server, llm_provider):
    moved = make_slice(
        profile, key="2026-09-20-1800", at=T1, lines=[("user", "Big news: we moved from Berlin to Lisbon 🇵🇹 last week")]
    )
    mid = first_user_mid(moved)
    llm_server.script(
        Turn(tool_calls=[("finish", {"summary": "Card unchanged."})]),
        Turn(
            tool_calls=[
                ("invalidate_experience", {"eid": berlin.eid, "stopped_at": "2026-09-13", "evidence_mids": ["c_0000000000000bad"], "reason": "moved"}),
            ]
        ),
        Turn(
            tool_calls=[
                ("invalidate_experience", {"eid": berlin.eid, "stopped_at": "2026-09-13", "evidence_mids": [mid], "reason": "moved to Lisbon"}),
                ("propose_experience", {"title": "Lives in Lisbon", "content": "Moved from Berlin to Lisbon", "source_mids": [mid], "event_time": "2026-09-13", "time_certainty": "approximate"}),
                ("finish", {"summary": "Berlin is over; Lisbon recorded."}),
            ]
        ),
    )

    run = execute_run(create_run(profile=profile, slice_=moved, trigger="manual").pk)

    assert run.status == EvolutionRun.Status.CHANGED, run.error
    card_request, review_request, second = llm_server.requests[:3]
    assert "invalidate_experience" not in offered(card_request)
    assert offered(review_request) == list(EXPERIENCE_PHASE)
    assert berlin.eid in review_request["messages"][1]["content"]
    assert "do not exist" in tool_messages(second)[0]
    berlin.refresh_from_db()
    assert berlin.invalid_at == datetime(2026, 9, 13, tzinfo=UTC)
    row = berlin.history.get(action="invalidate")
    assert (row.actor, row.run_id) == ("agent", run.pk)
    lisbon = Experience.objects.get(profile=profile, title="Lives in Lisbon")
    assert lisbon.history.get(action="create").run_id == run.pk
    assert "1 invalidated, 1 added" in run.summary
    assert f"- {berlin.eid} no longer true since 2026-09-13" in run.diff
    assert f"+ {lisbon.eid} (candidate): Lives in Lisbon" in run.diff
    assert run.card_after == run.card_before
    finished = [s for s in run.steps if s["event"] == "finished"]
    assert finished and "Experiences:" in finished[-1]["summary"]


def test_no_review_when_no_experience_shares_words_or_sources(profile, berlin, llm_server, llm_provider):
    quiet = make_slice(profile, key="2026-09-20-1800", at=T1, lines=[("user", "pizza tonight?")])
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "Nothing new."})]))

    run = execute_run(create_run(profile=profile, slice_=quiet, trigger="manual").pk)

    assert run.status == EvolutionRun.Status.UNCHANGED
    assert len(llm_server.requests) == 1


def test_no_review_during_an_open_slice(profile, berlin, llm_server, llm_provider):
    open_slice = make_slice(profile, key="2026-09-20-1800", at=T1, closed=False, lines=[("user", "remember: Berlin is over")])
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "Nothing new."})]))

    execute_run(create_run(profile=profile, slice_=open_slice, trigger="explicit").pk)

    assert len(llm_server.requests) == 1


def test_experience_tools_are_not_offered_while_editing_the_card(profile, berlin, llm_server, llm_provider):
    slice_ = make_slice(profile, key="2026-09-20-1800", at=T1, lines=[("user", "hi")])
    llm_server.script(
        Turn(tool_calls=[("invalidate_experience", {"eid": berlin.eid, "stopped_at": "2026-09-01", "evidence_mids": [], "reason": ""})]),
        Turn(tool_calls=[("finish", {"summary": "Nothing."})]),
    )

    execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    assert "not offered in this step" in tool_messages(llm_server.requests[1])[0]
    assert offered(llm_server.requests[0]) == list(CARD_PHASE)
    berlin.refresh_from_db()
    assert berlin.invalid_at is None


def test_a_hand_confirmed_experience_is_refused_to_the_agent_with_the_reason(profile, berlin, llm_server, llm_provider, user):
    berlin.edit(by=user, content="They live in Berlin — I wrote this myself")
    # The slice's lines are older than the person's hand edit (T1 is before the machine's now).
    slice_ = make_slice(profile, key="2026-09-20-1800", at=T1, lines=[("user", "Berlin was great but we left")])
    mid = first_user_mid(slice_)
    llm_server.script(
        Turn(tool_calls=[("finish", {"summary": "Card unchanged."})]),
        Turn(tool_calls=[("invalidate_experience", {"eid": berlin.eid, "stopped_at": "2026-09-13", "evidence_mids": [mid], "reason": "left"})]),
        Turn(tool_calls=[("finish", {"summary": "Left it to the person."})]),
    )

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    refusal = tool_messages(llm_server.requests[2])[0]
    assert refusal.startswith("refused: ") and "edited by the person" in refusal and "newer" in refusal
    berlin.refresh_from_db()
    assert berlin.invalid_at is None
    assert not ExperienceHistory.objects.filter(run=run).exists()
    assert run.status == EvolutionRun.Status.UNCHANGED


@pytest.mark.parametrize(
    ("tool", "arguments", "words"),
    [
        ("update_experience", {"eid": "exp_x", "title": "t", "content": "c", "evidence_mids": ["c_1"], "reason": ""}, "no experience 'exp_x'"),
        ("merge_experiences", {"keep_eid": "E", "merge_eid": "E", "title": "", "content": "", "evidence_mids": ["M"], "reason": ""}, "two different"),
        ("invalidate_experience", {"eid": "E", "stopped_at": "soon", "evidence_mids": ["M"], "reason": ""}, "not YYYY-MM-DD"),
        ("confirm_with_evidence", {"eid": "E", "evidence_mids": ["M"], "reason": ""}, "already active"),
        ("confirm_with_evidence", {"eid": "E", "evidence_mids": ["M"], "reason": "", "profile": "other"}, "unexpected argument(s) profile"),
        ("update_experience", {"eid": "E", "title": "Lives in Berlin", "content": "pizza", "evidence_mids": ["A"], "reason": ""}, "person wrote"),
    ],
)
def test_each_tool_refusal_reaches_the_model(profile, berlin, llm_server, llm_provider, tool, arguments, words):
    slice_ = make_slice(profile, key="2026-09-20-1800", at=T1, lines=[("user", "Berlin 🙂"), ("assistant", "Berlin!")])
    user_mid = first_user_mid(slice_)
    companion_mid = Message.objects.in_slice(slice_).get(speaker="assistant").mid
    fill = {"E": berlin.eid, "M": user_mid, "A": companion_mid}
    arguments = json.loads(json.dumps(arguments), object_hook=lambda d: {k: ([fill.get(x, x) for x in v] if isinstance(v, list) else fill.get(v, v)) for k, v in d.items()})
    llm_server.script(
        Turn(tool_calls=[("finish", {"summary": "Card unchanged."})]),
        Turn(tool_calls=[(tool, arguments)]),
        Turn(tool_calls=[("finish", {"summary": "Nothing."})]),
    )

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    result = tool_messages(llm_server.requests[2])[0]
    assert result.startswith("refused: ") and words in result, result
    assert not ExperienceHistory.objects.filter(run=run).exists()
    steps = [s for s in run.steps if s["event"] == "tool" and s["tool"] == tool]
    assert steps and steps[0]["accepted"] is False


def test_read_slice_log_shows_the_slices_cognitive_log(profile, llm_server, llm_provider):
    earlier = make_slice(profile, lines=[("user", "hi")])
    SliceLogEntry.objects.create(slice=earlier, kind="analyzer", summary="explicit request: remember my cat Miso")
    now = make_slice(profile, key="2026-09-20-1800", at=T1, lines=[("user", "hi again")])
    llm_server.script(
        Turn(tool_calls=[("read_slice_log", {"ref": earlier.ref}), ("read_slice_log", {"ref": "1999/01/01/0000"})]),
        Turn(tool_calls=[("finish", {"summary": "Nothing."})]),
    )

    execute_run(create_run(profile=profile, slice_=now, trigger="manual").pk)

    found, missing = tool_messages(llm_server.requests[1])
    assert f"log of [{earlier.ref}]" in found and "analyzer: explicit request: remember my cat Miso" in found
    assert missing.startswith("refused: no slice '1999/01/01/0000'")


def test_a_run_over_its_budget_is_failed_with_the_reason_and_retried_once(profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_AGENT_RUN_SECONDS = 1
    slice_ = make_slice(profile, lines=[("user", "I'm Mei")])
    llm_server.script(
        Turn(delay=1.3, tool_calls=[("set_identity", {"field": "Name", "value": "Mei", "refs": ["2026/08/17/0515"]})]),
        Turn(tool_calls=[("set_identity", {"field": "Name", "value": "Mei", "refs": ["2026/08/17/0515"]}), ("finish", {"summary": "Name."})]),
    )

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    failed = [s for s in run.steps if s["event"] == "failed"]
    assert len(failed) == 1 and "over its time budget of 1 s" in failed[0]["error"]
    assert [s["event"] for s in run.steps].count("retry") == 1
    assert run.status == EvolutionRun.Status.CHANGED


def test_a_run_over_its_budget_twice_stays_failed(profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_AGENT_RUN_SECONDS = 1
    slice_ = make_slice(profile, lines=[("user", "I'm Mei")])
    slow = Turn(delay=1.3, tool_calls=[("read_slice", {"ref": "2026/08/17/0515"})])
    llm_server.script(slow, slow)

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    assert run.status == EvolutionRun.Status.FAILED
    assert "PREVIOUSLY_AGENT_RUN_SECONDS" in run.error
    assert [s["event"] for s in run.steps].count("failed") == 2
    assert len(llm_server.requests) == 2


def test_tool_schemas_stay_compact_for_small_local_models():
    # The card phase's 16 schemas were 7,378 characters for 15 tools before issue 19.
    assert len(json.dumps(schemas(CARD_PHASE))) < 6500
    assert len(json.dumps(schemas(EXPERIENCE_PHASE))) < 4200
    assert all(len(tool.description) <= 80 for tool in REGISTRY.values())


def test_the_chat_pages_indicator_shows_the_experience_changes_live(profile, berlin, llm_server, llm_provider):
    moved = make_slice(profile, key="2026-09-20-1800", at=T1, lines=[("user", "We left Berlin for Lisbon")])
    mid = first_user_mid(moved)
    llm_server.script(
        Turn(tool_calls=[("finish", {"summary": "Card unchanged."})]),
        Turn(tool_calls=[
            ("invalidate_experience", {"eid": berlin.eid, "stopped_at": "2026-09-13", "evidence_mids": [mid], "reason": "moved"}),
            ("finish", {"summary": "Berlin is over."}),
        ]),
    )
    frames = []
    with listening(lambda run, step: frames.append(step["event"])):
        run = execute_run(create_run(profile=profile, slice_=moved, trigger="manual").pk)

    assert frames[:2] == ["started", "tool"] and "review" in frames and frames[-1] == "finished"
    html = render_to_string("card/evolution.html#finished", {"run": run, "step": {}, "event": "finished"})
    assert "Memory updated:" in html and f"- {berlin.eid} no longer true since 2026-09-13" in html
