"""K10: the turn analyzer — explicit requests (zh/en), the worth-it gate, failure, migration."""

import pytest

from memory.models import Card, EvolutionRun, SliceLogEntry
from previously.agent.analyzer import detect_request
from previously.agent.lifecycle import after_reply, slice_closed
from previously.llm import reset_provider
from previously.llm.offline import Offline
from tests.llm_server import Turn
from tests.previously.agent.helpers import make_slice, set_card


@pytest.mark.parametrize(
    "text",
    [
        "Remember that my sister is called Lin.",
        "please update your card: I moved to Berlin",
        "Stop calling me buddy.",
        "From now on always answer in English.",
        "记住,我下周三要去面试。",
        "别再叫我小朋友了",
        "以后总是先问我再给建议",
        "更新你的卡片:我换工作了",
        "你记错了,我养的是猫",
    ],
)
def test_explicit_requests_are_spotted_by_the_rules(text):
    assert detect_request(text).explicit


@pytest.mark.parametrize(
    "text",
    ["Do you remember when we met?", "今天天气不错", "I had pasta for lunch 🍝", "他叫我去吃饭"],
)
def test_ordinary_turns_are_not_requests(text):
    assert not detect_request(text).explicit


@pytest.mark.django_db
def test_after_reply_starts_an_explicit_run_at_once(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, closed=False, lines=[("user", "记住,我叫小梅")])
    llm_server.script(
        Turn(tool_calls=[("set_identity", {"field": "Name", "value": "小梅", "refs": [slice_.ref]})]),
        Turn(tool_calls=[("finish", {"summary": "记下了她的名字。"})]),
    )

    verdict = after_reply(profile, slice_, "记住,我叫小梅", "好的,小梅!")

    assert verdict.explicit and verdict.run is not None
    run = EvolutionRun.objects.get(pk=verdict.run.pk)
    assert (run.trigger, run.status) == ("explicit", "changed")
    assert "记住,我叫小梅" in llm_server.requests[0]["messages"][1]["content"]
    assert "- Name: 小梅" in Card.objects.get(profile=profile).text
    assert SliceLogEntry.objects.filter(slice=slice_, kind="analyzer", summary__startswith="memory_request").exists()


@pytest.mark.django_db
def test_the_model_spots_what_the_rules_miss(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, closed=False, lines=[("user", "btw it's Mei, not May")])
    llm_server.script(
        Turn(content='{"memory_update": true, "kind": "correction", "reason": "name corrected"}'),
        Turn(tool_calls=[("finish", {"summary": "Nothing to change."})]),
    )

    verdict = after_reply(profile, slice_, "btw it's Mei, not May", "Sorry, Mei!")

    assert not verdict.explicit  # the rules' answer, returned at once
    run = EvolutionRun.objects.get(profile=profile)
    assert (run.trigger, run.status) == ("explicit", "unchanged")
    assert SliceLogEntry.objects.filter(slice=slice_, summary__contains="name corrected").exists()


@pytest.mark.django_db
def test_a_failing_turn_analyzer_falls_back_to_the_rules(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, closed=False, lines=[("user", "nice weather")])
    llm_server.script(Turn(content="I think maybe?"))

    verdict = after_reply(profile, slice_, "nice weather", "It is!")

    assert not verdict.explicit
    assert not EvolutionRun.objects.filter(profile=profile).exists()
    assert SliceLogEntry.objects.filter(slice=slice_, summary__startswith="turn analyzer model failed").exists()


@pytest.mark.django_db
def test_offline_after_reply_uses_the_rules_and_records_a_skipped_run(profile):
    slice_ = make_slice(profile, closed=False, lines=[("user", "remember I like tea")])
    reset_provider(Offline())
    try:
        verdict = after_reply(profile, slice_, "remember I like tea", "")
    finally:
        reset_provider(None)

    run = EvolutionRun.objects.get(pk=verdict.run.pk)
    assert (run.status, run.skip_reason) == ("skipped", "no model configured")


@pytest.mark.django_db
def test_slice_close_asks_whether_it_is_worth_it(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "hi"), ("assistant", "hello")])
    llm_server.script(Turn(content='{"worth": false, "reason": "small talk"}'))

    run = slice_closed(slice_)

    run.refresh_from_db()
    assert (run.trigger, run.status, run.skip_reason) == ("slice_close", "skipped", "nothing worth keeping")
    assert len(llm_server.requests) == 1
    assert SliceLogEntry.objects.filter(slice=slice_, kind="analyzer", summary__contains="small talk").exists()


@pytest.mark.django_db
def test_a_failing_worth_analyzer_runs_anyway(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "I adopted a cat named Miso")])
    llm_server.script(
        Turn(content="no json here"),
        Turn(tool_calls=[("add_now", {"text": "New cat Miso", "refs": [slice_.ref], "since": "2026-08-17"})]),
        Turn(tool_calls=[("finish", {"summary": "Added the new cat."})]),
    )

    run = slice_closed(slice_)

    run.refresh_from_db()
    assert run.status == "changed"
    assert run.steps[0] == {**run.steps[0], "event": "note", "note": "analyzer failed — ran anyway"}
    assert "analyzer failed — ran anyway" in llm_server.requests[1]["messages"][1]["content"]
    assert SliceLogEntry.objects.filter(slice=slice_, summary="analyzer failed — ran anyway").exists()


@pytest.mark.django_db
def test_a_legacy_card_forces_a_run_without_asking(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "hi")])
    set_card(profile, "USER PROFILE\nname: Alex\nlikes: tea\n")
    llm_server.script(
        Turn(tool_calls=[("set_identity", {"field": "Name", "value": "Alex", "refs": [slice_.ref]})]),
        Turn(tool_calls=[("finish", {"summary": "Migrated the old card."})]),
    )

    run = slice_closed(slice_)

    run.refresh_from_db()
    assert (run.trigger, run.status) == ("migration", "changed")
    assert "older format" in llm_server.requests[0]["messages"][1]["content"]
    assert "likes: tea" in llm_server.requests[0]["messages"][1]["content"]
    assert Card.objects.get(profile=profile).text.startswith("# Previously On")


def test_the_model_analyzer_can_be_switched_off(profile, settings, llm_server, llm_provider):
    from previously.agent.lifecycle import after_reply
    from tests.previously.agent.helpers import make_slice

    settings.PREVIOUSLY_TURN_ANALYZER_MODEL = False
    slice_ = make_slice(profile, closed=False, lines=[("user", "what a day")])
    after_reply(profile, slice_, "what a day", "It sounds long.")
    assert llm_server.requests == []
