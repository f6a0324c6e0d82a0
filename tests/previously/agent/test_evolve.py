"""The Previously Agent against a real OpenAI-compatible HTTP server (K3, K7, K8, K11)."""

import json

import pytest

from memory.card import parse, usage
from memory.models import Card, CardSnapshot, EvolutionRun, SliceLogEntry
from previously.agent.evolve import create_run, execute_run
from tests.llm_server import Turn
from tests.previously.agent.helpers import make_slice, set_card

pytestmark = pytest.mark.django_db

TOOL_NAMES = [
    "set_identity",
    "set_portrait",
    "add_anchor_fact",
    "remove_anchor_fact",
    "add_now",
    "remove_now",
    "promote_now",
    "add_horizon",
    "resolve_horizon",
    "add_lesson",
    "remove_lesson",
    "read_slice",
    "read_card_at",
    "read_slice_log",
    "propose_experience",
    "finish",
]
REF = "2026/08/17/0515"


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_refusals_reach_the_model_and_the_corrected_writes_land(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "I'm Mei, I just started a pottery class")])
    llm_server.script(
        Turn(tool_calls=[("set_portrait", {"text": "Mei " + "x" * 2500})]),
        Turn(tool_calls=[("add_now", {"text": "Pottery class on Tuesdays", "refs": [], "since": "2026-08-17"})]),
        Turn(
            tool_calls=[
                ("set_portrait", {"text": "Mei is learning pottery."}),
                ("add_now", {"text": "Pottery class on Tuesdays", "refs": [REF], "since": "2026-08-17"}),
                ("set_identity", {"field": "Name", "value": "Mei", "refs": [REF]}),
            ]
        ),
        Turn(tool_calls=[("finish", {"summary": "Recorded Mei's name and her pottery class."})]),
    )
    run = create_run(profile=profile, slice_=slice_, trigger=EvolutionRun.Trigger.MANUAL)

    run = execute_run(run.pk)

    assert run.status == EvolutionRun.Status.CHANGED, run.error
    second, third = llm_server.requests[1], llm_server.requests[2]
    assert "portrait is 2504 chars, limit 2400 — compress and retry" in tool_messages(second)[0]
    assert tool_messages(second)[0].startswith("refused: ")
    assert "refs are required" in tool_messages(third)[-1]
    card = parse(Card.objects.get(profile=profile).text)
    assert card.portrait == "Mei is learning pottery."
    assert [(n.text, n.refs) for n in card.now] == [("Pottery class on Tuesdays", (REF,))]
    assert [(i.field, i.value) for i in card.identity] == [("Name", "Mei")]
    assert card.header.active_slice == slice_.key
    assert run.summary == "Recorded Mei's name and her pottery class."
    assert "+- Name: Mei — refs: [2026/08/17/0515]" in run.diff
    assert CardSnapshot.objects.get(slice=slice_).text == Card.objects.get(profile=profile).text


def test_the_model_is_offered_exactly_the_agent_tools(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "hi")])
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "Nothing new."})]))

    execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    offered = [t["function"]["name"] for t in llm_server.requests[0]["tools"]]
    assert offered == TOOL_NAMES
    schema = {t["function"]["name"]: t["function"]["parameters"] for t in llm_server.requests[0]["tools"]}
    assert schema["add_now"]["required"] == ["text", "refs", "since"]
    assert schema["add_now"]["properties"]["refs"]["type"] == "array"


def test_the_model_sees_usage_flags_and_the_slice(profile, llm_server, llm_provider):
    from tests.memory.card.samples import SEED_CARD

    slice_ = make_slice(profile, lines=[("user", "The speech went great!")])
    set_card(profile, SEED_CARD)
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "Nothing new."})]))

    execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    briefing = llm_server.requests[0]["messages"][1]["content"]
    card = parse(SEED_CARD)
    assert usage(card) in briefing
    assert "Flagged items:" in briefing
    assert f"Past portrait chars {len(card.portrait)}/2400" in briefing
    assert "The speech went great!" in briefing
    assert "Draft the wedding speech for Lao Zhou" in briefing


def test_a_no_op_run_writes_nothing(profile, llm_server, llm_provider):
    from tests.memory.card.samples import SEED_CARD

    slice_ = make_slice(profile, lines=[("user", "hi")])
    set_card(profile, SEED_CARD, version=3)
    llm_server.script(
        Turn(tool_calls=[("add_now", {"text": "Tired today", "refs": [REF], "since": "2026-08-17"})]),
        Turn(tool_calls=[("remove_now", {"index": 2}), ("finish", {"summary": "Nothing lasting."})]),
    )

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    card = Card.objects.get(profile=profile)
    assert run.status == EvolutionRun.Status.UNCHANGED
    assert (card.text, card.version) == (SEED_CARD, 3)
    assert run.diff == ""


def test_bad_json_and_unknown_tools_are_explained_and_the_loop_goes_on(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "hi")])
    llm_server.script(
        Turn(tool_calls=[("set_portrait", "{not json"), ("drop_card", {})]),
        Turn(tool_calls=[("finish", {"summary": "Nothing new."})]),
    )

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    results = tool_messages(llm_server.requests[1])
    assert "not valid JSON" in results[0]
    assert "unknown tool 'drop_card'" in results[1]
    assert run.status == EvolutionRun.Status.UNCHANGED


def test_read_slice_is_limited_to_the_runs_profile(profile, llm_server, llm_provider):
    from tests.factories import ProfileFactory

    mine = make_slice(profile, lines=[("user", "my own words")])
    other = ProfileFactory()
    make_slice(other, key="2026-08-10-0900", lines=[("user", "someone else's secret")])
    llm_server.script(
        Turn(tool_calls=[("read_slice", {"ref": "2026/08/10/0900"}), ("read_slice", {"ref": mine.ref})]),
        Turn(tool_calls=[("add_now", {"text": "x", "refs": ["2026/08/10/0900"], "since": "2026-08-10"})]),
        Turn(tool_calls=[("finish", {"summary": "Nothing."})]),
    )

    execute_run(create_run(profile=profile, slice_=mine, trigger="manual").pk)

    first, second = tool_messages(llm_server.requests[1])
    assert first.startswith("refused: no slice '2026/08/10/0900'")
    assert "my own words" in second
    assert "someone else's secret" not in json.dumps(llm_server.requests)
    assert "refs not found among this profile's slices" in tool_messages(llm_server.requests[2])[-1]


def test_read_card_at_returns_the_snapshot(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "hi")])
    CardSnapshot.objects.create(profile=profile, slice=slice_, text="# old card text")
    llm_server.script(
        Turn(tool_calls=[("read_card_at", {"ref": slice_.ref})]),
        Turn(tool_calls=[("finish", {"summary": "Nothing."})]),
    )

    execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    assert "# old card text" in tool_messages(llm_server.requests[1])[0]


def test_the_step_limit_stops_the_run_and_keeps_accepted_writes(profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_AGENT_MAX_STEPS = 2
    slice_ = make_slice(profile, lines=[("user", "hi")])
    llm_server.script(
        Turn(tool_calls=[("set_portrait", {"text": "Likes tea."})]),
        Turn(tool_calls=[("read_slice", {"ref": slice_.ref})]),
        Turn(tool_calls=[("finish", {"summary": "never reached"})]),
    )

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    assert len(llm_server.requests) == 2
    assert run.status == EvolutionRun.Status.CHANGED
    assert run.summary == "stopped after 2 model calls without finishing"


def test_a_model_failure_mid_run_leaves_the_card_untouched(profile, llm_server, llm_provider):
    from tests.memory.card.samples import SEED_CARD

    slice_ = make_slice(profile, lines=[("user", "hi")])
    set_card(profile, SEED_CARD, version=2)
    llm_server.script(
        Turn(tool_calls=[("set_portrait", {"text": "Rewritten."})]),
        Turn(status=500),
        Turn(status=500),
    )

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    assert run.status == EvolutionRun.Status.FAILED
    assert "500" in run.error
    card = Card.objects.get(profile=profile)
    assert (card.text, card.version) == (SEED_CARD, 2)
    assert SliceLogEntry.objects.filter(slice=slice_, summary__contains="failed").exists()


def test_no_model_configured_records_a_skipped_run(profile):
    from previously.llm import reset_provider
    from previously.llm.offline import Offline

    slice_ = make_slice(profile, lines=[("user", "hi")])
    reset_provider(Offline())
    try:
        run = execute_run(create_run(profile=profile, slice_=slice_, trigger="slice_close").pk)
    finally:
        reset_provider(None)

    assert (run.status, run.skip_reason) == (EvolutionRun.Status.SKIPPED, "no model configured")
    assert run.steps[-1]["event"] == "skipped"


def test_a_redelivered_run_is_not_carried_out_twice(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "hi")])
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "Nothing."})]))
    run = create_run(profile=profile, slice_=slice_, trigger="manual")

    execute_run(run.pk)
    again = execute_run(run.pk)

    assert again.status == EvolutionRun.Status.UNCHANGED
    assert len(llm_server.requests) == 1


def test_runs_interrupted_by_a_dead_process_are_marked_failed(profile):
    from datetime import timedelta

    from django.utils import timezone

    from previously.agent.lifecycle import fail_stale_runs

    run = create_run(profile=profile, slice_=None, trigger="manual")
    # Already retried once (tests/previously/agent/test_faults.py covers the retry itself).
    EvolutionRun.objects.filter(pk=run.pk).update(
        status="running", created_at=timezone.now() - timedelta(hours=1), steps=[{"event": "retry"}]
    )

    assert fail_stale_runs() == 1
    run.refresh_from_db()
    assert run.status == "failed" and "card is unchanged" in run.error


def test_the_agent_proposes_a_candidate_experience_citing_real_messages_c3(profile, llm_server, llm_provider):
    from memory.models import Experience

    slice_ = make_slice(profile, lines=[("user", "我上周去杭州爬了宝石山 🏔")])
    mid = slice_.messages.get().mid
    llm_server.script(
        Turn(tool_calls=[("propose_experience", {"title": "爬宝石山", "content": "上周在杭州爬了宝石山",
                                                 "source_mids": ["c_ffffffffffffffff"], "event_time": "",
                                                 "time_certainty": "approximate"})]),
        Turn(tool_calls=[("propose_experience", {"title": "爬宝石山", "content": "上周在杭州爬了宝石山",
                                                 "source_mids": [mid], "event_time": "2026-08-10",
                                                 "time_certainty": "approximate"})]),
        Turn(tool_calls=[("finish", {"summary": "Proposed the hike as an experience."})]),
    )

    execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    assert "c_ffffffffffffffff" in tool_messages(llm_server.requests[1])[0]
    assert tool_messages(llm_server.requests[1])[0].startswith("refused: ")
    experience = Experience.objects.get(profile=profile)
    assert (experience.status, experience.title, experience.source_mids) == ("candidate", "爬宝石山", [mid])
    assert experience.event_time.date().isoformat() == "2026-08-10"
    assert experience.history.get().actor == "agent"
