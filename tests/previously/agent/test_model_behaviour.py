"""What small local models do to the agent (issue 26 points 1, 3, 4, 5; K3, L4): capped calls,
plain text instead of tool calls, bad tool calls, a request fitted to the model's window.
Against the scripted HTTP server (tests/llm_server.py), through the real SDK."""

import json

import pytest
from django.template.loader import render_to_string
from django.utils.translation import override

from memory.card.validate import violations
from memory.models import Card, EvolutionRun
from previously.agent import tools
from previously.agent.analyzer import worth_evolving
from previously.agent.evolve import NO_TOOLS, create_run, execute_run, fit_request
from previously.chat import proactive
from tests.llm_server import Turn
from tests.previously.agent.helpers import make_slice, set_card

pytestmark = pytest.mark.django_db

REF = "2026/08/17/0515"
CARD = "# Previously On\n"


def _run(profile, trigger=EvolutionRun.Trigger.MANUAL, lines=(("user", "I'm Mei and I moved to Lyon"),)):
    slice_ = make_slice(profile, lines=list(lines))
    set_card(profile, CARD)
    return create_run(profile=profile, slice_=slice_, trigger=trigger)


def test_every_agent_step_caps_its_output(profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_AGENT_STEP_MAX_TOKENS = 321
    run = _run(profile)
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "Nothing new."})]))
    execute_run(run.pk)
    assert [r["max_tokens"] for r in llm_server.requests] == [321]


def test_free_text_is_never_the_runs_summary_and_the_model_is_nudged_once(profile, llm_server, llm_provider):
    run = _run(profile)
    llm_server.script(
        Turn(content="[2026/01/01/0000] I think the card is fine [fact-77]"),
        Turn(tool_calls=[("finish", {"summary": "Nothing worth changing."})]),
    )
    run = execute_run(run.pk)
    assert run.status != EvolutionRun.Status.FAILED
    assert run.summary == "Nothing worth changing."
    nudge = llm_server.requests[1]["messages"][-1]
    assert nudge["role"] == "user" and "only acts through tool calls" in nudge["content"]
    assert "[fact-77]" not in run.summary


def test_a_model_that_never_calls_tools_ends_as_this_model_does_not_use_tools(profile, llm_server, llm_provider):
    run = _run(profile)
    llm_server.script(Turn(content="Sure! Here is the card: ..."), Turn(content="As I said, the card is fine."))
    run = execute_run(run.pk)
    assert run.status == EvolutionRun.Status.FAILED and run.error == NO_TOOLS
    assert len(llm_server.requests) == 2  # one nudge, no more calls
    assert Card.objects.get(profile=profile).text == CARD
    failed = [s for s in run.steps if s["event"] == "failed"]
    assert failed and "PREVIOUSLY_AGENT_MODEL" in failed[0]["error"]


def test_the_chat_indicator_says_it_in_the_persons_language(profile, llm_server, llm_provider):
    profile.language = "zh"
    profile.save(update_fields=["language"])
    run = _run(profile)
    llm_server.script(Turn(content="text"), Turn(content="more text"))
    execute_run(run.pk)
    run.refresh_from_db()
    with override("zh-hans"):
        html = render_to_string("card/evolution.html#failed", {"run": run})
    assert "这个模型不会调用工具" in html and "PREVIOUSLY_AGENT_MODEL" in html


def test_invalid_json_and_an_unknown_tool_are_refused_with_reasons_and_the_run_goes_on(profile, llm_server, llm_provider):
    run = _run(profile)
    llm_server.script(
        Turn(tool_calls=[("set_identity", '{"field": "Name", "value": "Mei", "refs": [')]),
        Turn(tool_calls=[("rewrite_whole_card", {"text": "# all new"})]),
        Turn(tool_calls=[("set_identity", {"field": "Name", "value": "Mei", "refs": [REF]})]),
        Turn(tool_calls=[("finish", {"summary": "Recorded Mei's name."})]),
    )
    run = execute_run(run.pk)
    results = [(s["tool"], s["accepted"], s["result"]) for s in run.steps if s["event"] == "tool"]
    assert results[0][:2] == ("set_identity", False) and "not valid JSON" in results[0][2]
    assert results[1][:2] == ("rewrite_whole_card", False) and "unknown tool" in results[1][2]
    assert results[2][1] is True
    assert run.status == EvolutionRun.Status.CHANGED
    text = Card.objects.get(profile=profile).text
    assert "Name: Mei" in text and violations(text) == []  # K1-K3: the card stays valid
    # the refusals went back to the model as the tool results
    sent = [m for m in llm_server.requests[1]["messages"] if m["role"] == "tool"]
    assert "not valid JSON" in sent[0]["content"]


def test_the_analyzer_and_proactive_messages_cap_their_output(profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_ANALYZER_MAX_TOKENS = 40
    settings.PREVIOUSLY_PROACTIVE_MAX_TOKENS = 50
    slice_ = make_slice(profile, lines=[("user", "I start at the bakery on Monday")])
    llm_server.script(Turn(content='{"worth": true, "reason": "a new job"}'), Turn(content="Welcome back!"))
    assert worth_evolving(slice_).worth
    assert proactive._generate(profile, "Write first.") == "Welcome back!"
    assert [r["max_tokens"] for r in llm_server.requests] == [40, 50]


def test_the_first_request_fits_the_window_trimming_recall_first_and_tools_last(profile, settings):
    settings.PREVIOUSLY_AGENT_STEP_MAX_TOKENS = 200
    parts = [("trigger", "Trigger: x"), ("card", "Current card:\n# Previously On"), ("recent", "Recent slices: " + "2026/01/01/0000, " * 50),
             ("transcript", "Transcript of slice 2026/08/17/0515:\n" + "\n".join(f"[user] line {i} " + "word " * 20 for i in range(80)))]
    offered = tools.schemas(tools.CARD_PHASE)
    everything, all_tools, left = fit_request(parts, offered, window=None)
    assert left == [] and all_tools == offered
    # a window that holds everything but the recall-like parts
    messages, kept, left = fit_request(parts, offered, window=4000)
    assert left[0] == "the list of other slices" and "older part" in left[1]
    assert kept == offered  # the tools stay whole while trimming the context is enough
    assert "Current card" in messages[1]["content"] and "line 79" in messages[1]["content"]
    assert "line 0 " not in messages[1]["content"]
    # a tiny window: then the schemas lose their descriptions, then tools, never finish
    messages, kept, left = fit_request(parts, offered, window=900)
    assert "the tools' descriptions" in left
    assert "finish" in [t["function"]["name"] for t in kept]
    assert all("description" not in t["function"] for t in kept)


def test_the_run_log_says_what_was_left_out(profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS = 3000
    settings.PREVIOUSLY_AGENT_STEP_MAX_TOKENS = 200
    run = _run(profile, lines=[("user", "I moved to Lyon " + "and then " * 40)] * 30)
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "ok"})]))
    run = execute_run(run.pk)
    fitted = [s for s in run.steps if s["event"] == "fitted"]
    assert fitted and "window of 3000 tokens" in fitted[0]["note"] and "transcript" in fitted[0]["note"]
    first = llm_server.requests[0]
    assert len(json.dumps(first["messages"])) + len(json.dumps(first["tools"])) < 3000 * 4


def test_later_steps_shorten_the_oldest_tool_results_to_stay_in_the_window(profile, llm_server, llm_provider, settings):
    settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS = 3000
    settings.PREVIOUSLY_AGENT_STEP_MAX_TOKENS = 200
    other = make_slice(profile, key="2026-08-10-0900", lines=[("user", "Long ago " + "we talked about tulips " * 12)] * 20)
    run = _run(profile)
    llm_server.script(
        Turn(tool_calls=[("read_slice", {"ref": other.ref})]),
        Turn(tool_calls=[("read_slice", {"ref": other.ref})]),
        Turn(tool_calls=[("finish", {"summary": "ok"})]),
    )
    run = execute_run(run.pk)
    last = llm_server.requests[-1]["messages"]
    assert any(m["role"] == "tool" and m["content"] == "[left out to fit the model's window]" for m in last)
    assert any(s["event"] == "fitted" and "older tool results" in s["note"] for s in run.steps)
