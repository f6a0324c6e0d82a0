"""D6/D7: replies quoting a deleted line, card lines citing its conversation, the forget run,
and the agent held to the person's removals."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.archive import MidTombstoned, archive_message
from memory.card import parse, render
from memory.card.format import Card as ParsedCard
from memory.card.format import Fact
from memory.card.lines import card_lines
from memory.deleted_words import Quotes
from memory.deletion import HasRefs, delete_message, delete_slice, message_refs, slice_refs
from memory.models import Card, EvolutionRun, Message
from memory.rewrite_guard import person_changes, rewrite_refusal
from previously.agent.evolve import briefing, create_run
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db


def card_citing(profile, ref, *facts):
    text = render(ParsedCard(facts=tuple(Fact(t, (ref,)) for t in facts)))
    Card.objects.update_or_create(profile=profile, defaults={"text": text, "version": 1})


def test_quotes_find_verbatim_runs_and_blank_them():
    q = Quotes(["我的猫叫豆豆，它三岁了，很喜欢晒太阳 ☀️", "ok"])
    assert q.found("她说「我的猫叫豆豆，它三岁了」")
    assert q.scrub("她说「我的猫叫豆豆，它三岁了」真可爱") == "她说「[deleted]」真可爱"
    assert not q.found("我的猫叫咪咪")  # a short common run is not a quote
    assert q.scrub("ok then") == "ok then"  # texts under 4 characters are not looked for
    assert q.scrub_json({"a": ["x 我的猫叫豆豆，它三岁了 y"]}) == {"a": ["x [deleted] y"]}


def test_the_confirmation_lists_quoting_replies_and_citing_card_lines(profile):
    slice_ = make_slice(profile, lines=[("user", "I finally told my sister about the new job in Lyon"),
                                        ("assistant", "You said: I finally told my sister about the new job in Lyon")])
    card_citing(profile, slice_.ref, "Moving to Lyon for a new job", "Close to her sister")
    said = Message.objects.get(profile=profile, speaker="user")
    refs = message_refs(said)
    kinds = [(r["kind"], r.get("effect")) for r in refs]
    assert kinds == [("reply", None), ("card", "cites"), ("card", "cites")]
    with pytest.raises(HasRefs):
        delete_message(profile=profile, mid=said.mid, hard=True)


def test_the_person_chooses_which_citing_lines_go_and_the_run_records_it(profile):
    slice_ = make_slice(profile, lines=[("user", "I finally told my sister about the new job in Lyon")])
    card_citing(profile, slice_.ref, "Moving to Lyon for a new job", "Close to her sister")
    said = Message.objects.get(profile=profile)
    lyon = next(line for line in card_lines(parse(Card.objects.get(profile=profile).text)) if "Lyon" in line.text)

    result = delete_message(profile=profile, mid=said.mid, hard=True, force=True, drop_lines=[lyon.key])

    card = parse(Card.objects.get(profile=profile).text)
    assert [f.text for f in card.facts] == ["Close to her sister"]
    run = EvolutionRun.objects.get(pk=result.run_id)
    assert run.trigger == "forget" and run.status == "changed"
    assert "-- Moving to Lyon for a new job — refs: [2026/08/17/0515]" in run.diff
    assert run.steps[0]["removed"][0]["words"] == "Moving to Lyon for a new job"
    assert result.card_lines_removed == ["Moving to Lyon for a new job — refs: [2026/08/17/0515]"]


def test_kept_replies_keep_their_other_words_and_the_mid_cannot_come_back(profile):
    slice_ = make_slice(profile, lines=[("user", "我把钥匙藏在门口的花盆下面了"),
                                        ("assistant", "好的，你说「我把钥匙藏在门口的花盆下面了」，我记住了。")])
    said = Message.objects.get(profile=profile, speaker="user")
    delete_message(profile=profile, mid=said.mid, hard=True, force=True, keep_replies=True)
    reply = Message.objects.get(profile=profile)
    assert reply.content == "好的，你说「[deleted]」，我记住了。"
    with pytest.raises(MidTombstoned):
        archive_message(profile=profile, mid=said.mid, speaker="user", content="我把钥匙藏在门口的花盆下面了")
    assert slice_.pk


def test_the_briefing_names_removals_and_the_tool_refuses_to_write_them_back(profile):
    slice_ = make_slice(profile, lines=[("user", "I finally told my sister about the new job in Lyon")])
    card_citing(profile, slice_.ref, "Moving to Lyon for a new job")
    said = Message.objects.get(profile=profile)
    key = card_lines(parse(Card.objects.get(profile=profile).text))[0].key
    delete_message(profile=profile, mid=said.mid, hard=True, force=True, drop_lines=[key])
    at = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=2)
    later = make_slice(profile, key=at.strftime("%Y-%m-%d-%H%M"), lines=[("user", "Lyon is lovely, the job started")], at=at)
    run = create_run(profile=profile, slice_=later, trigger="manual")

    text = briefing(run, parse(Card.objects.get(profile=profile).text))

    assert "removed (Past): Moving to Lyon for a new job" in text
    card = parse(Card.objects.get(profile=profile).text)
    old = rewrite_refusal(profile, card, "add_anchor_fact", {"text": "Moving to Lyon for a new job", "refs": [slice_.ref]})
    assert old and "removed “Moving to Lyon for a new job”" in old and "newer slice" in old
    assert rewrite_refusal(profile, card, "add_anchor_fact", {"text": "Moving to Lyon for a new job", "refs": [later.ref]}) is None
    assert rewrite_refusal(profile, card, "add_anchor_fact", {"text": "Plays the cello", "refs": [slice_.ref]}) is None
    assert [c.kind for c in person_changes(profile)] == ["removed"]
    assert json.dumps(run.steps)


def test_everyday_wording_the_person_uses_elsewhere_is_not_a_quote(profile):
    make_slice(profile, key="2026-08-10-0900", lines=[("user", "I don't know what to do about dinner tonight")],
               at=timezone.now().replace(year=2026, month=8, day=10, hour=9, minute=0))
    slice_ = make_slice(profile, lines=[("user", "I don't know what to do about the offer from Lyon"),
                                        ("assistant", "I don't know what to tell you, sleep on it?")])
    said = Message.objects.get(slice=slice_, speaker="user")
    assert [r["kind"] for r in message_refs(said)] == []
    delete_message(profile=profile, mid=said.mid, hard=True)
    assert Message.objects.get(slice=slice_).content == "I don't know what to tell you, sleep on it?"


def test_a_conversation_deleted_whole_takes_the_chosen_citing_lines_even_with_no_line_left(profile):
    slice_ = make_slice(profile)  # its lines were deleted one by one before
    card_citing(profile, slice_.ref, "Moving to Lyon for a new job", "Close to her sister")
    assert [r["kind"] for r in slice_refs(slice_)] == ["card", "card"]
    lyon = next(line.key for line in card_lines(parse(Card.objects.get(profile=profile).text)) if "Lyon" in line.text)

    result = delete_slice(slice_, drop_lines=[lyon])

    assert [f.text for f in parse(Card.objects.get(profile=profile).text).facts] == ["Close to her sister"]
    assert result.card_lines_removed == ["Moving to Lyon for a new job — refs: [2026/08/17/0515]"]


def test_a_line_kept_when_its_conversation_is_deleted_cites_the_person(profile):
    """Issue 25 point 5 (D7, K16): the kept line stops citing the deleted conversation; it cites
    `[you]`, the run says so, and the agent treats it as the person's line."""
    slice_ = make_slice(profile, lines=[("user", "I finally told my sister about the new job in Lyon")])
    card_citing(profile, slice_.ref, "Moving to Lyon for a new job", "Close to her sister")
    lyon = next(line.key for line in card_lines(parse(Card.objects.get(profile=profile).text)) if "Lyon" in line.text)

    result = delete_slice(slice_, drop_lines=[lyon])

    card = parse(Card.objects.get(profile=profile).text)
    assert [(f.text, f.refs) for f in card.facts] == [("Close to her sister", ("you",))]
    assert slice_.ref not in render(card)
    run = EvolutionRun.objects.get(pk=result.run_id)
    assert run.summary.endswith("1 kept, now citing you")
    assert run.steps[0]["added"] == [{"section": "Past", "words": "Close to her sister", "text": "Close to her sister"}]
    refused = rewrite_refusal(profile, card, "remove_anchor_fact", {"index": 1})
    assert refused and "Close to her sister" in refused
