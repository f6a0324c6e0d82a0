"""K16: the person corrects the card by hand — edit, remove, add, portrait, revert — through
the validated mutations, each recorded as a run on the timeline and binding the agent."""

import json
from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.card import parse, render
from memory.card.format import Card as ParsedCard
from memory.card.format import Fact, IdentityLine, NowItem
from memory.card.lines import card_lines
from memory.card.store import refs_resolver, snapshot_slice
from memory.card_corrections import (
    CardMoved,
    EditRefused,
    add_line,
    edit_line,
    remove_line,
    revert_to,
    set_portrait,
)
from memory.models import Card, EvolutionRun
from memory.rewrite_guard import rewrite_refusal
from previously.agent.evolve import briefing, create_run
from previously.agent.tools import Context, dispatch
from tests.csp import assert_csp_clean
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db
REF = "2026/08/17/0515"


@pytest.fixture
def carded(profile):
    slice_ = make_slice(profile, lines=[("user", "I'm Mei, I moved to Lyon")])
    text = render(ParsedCard(
        identity=(IdentityLine("Name", "Mei", (REF,)),),
        facts=(Fact("Moved to Lyon in 2026", (REF,)), Fact("Has a cat called Tofu", (REF,))),
        now=(NowItem("Learning pottery", (REF,), slice_.started_at.date()),),
    ))
    Card.objects.update_or_create(profile=profile, defaults={"text": text, "version": 1})
    return slice_


def key_of(profile, words):
    return next(x.key for x in card_lines(parse(Card.objects.get(profile=profile).text)) if x.words == words)


def test_an_edit_keeps_its_place_cites_the_person_and_is_a_run(profile, carded):
    done = edit_line(profile, version=1, key=key_of(profile, "Moved to Lyon in 2026"), text="Moved to Lyon in 2025 🇫🇷")
    card = parse(Card.objects.get(profile=profile).text)
    assert [(f.text, f.refs) for f in card.facts] == [("Moved to Lyon in 2025 🇫🇷", ("you",)), ("Has a cat called Tofu", (REF,))]
    run = done.run
    assert (run.trigger, run.status, run.slice_id) == ("hand_edit", "changed", carded.pk)
    assert run.summary == "You corrected Past: “Moved to Lyon in 2026” → “Moved to Lyon in 2025 🇫🇷”"
    assert "-- Moved to Lyon in 2026 — refs: [2026/08/17/0515]" in run.diff
    assert "+- Moved to Lyon in 2025 🇫🇷 — refs: [you]" in run.diff


def test_edits_are_validated_like_the_agents_and_guarded_by_version(profile, carded):
    with pytest.raises(EditRefused, match="300"):
        edit_line(profile, version=1, key=key_of(profile, "Learning pottery"), text="x" * 301)
    with pytest.raises(EditRefused, match="already says this"):
        add_line(profile, version=1, attr="facts", text="has a cat called tofu")
    with pytest.raises(CardMoved):
        remove_line(profile, version=0, key=key_of(profile, "Learning pottery"))
    assert Card.objects.get(profile=profile).version == 1
    assert not EvolutionRun.objects.filter(trigger="hand_edit").exists()


def test_remove_add_identity_and_revert(profile, carded):
    snapshot_slice(carded)
    remove_line(profile, version=1, key=key_of(profile, "Has a cat called Tofu"))
    add_line(profile, version=2, attr="identity", text="Address them as: 小梅")
    edit_line(profile, version=3, key=key_of(profile, "Name: Mei"), text="Name: Mei Lin")
    card = parse(Card.objects.get(profile=profile).text)
    assert [(i.field, i.value) for i in card.identity] == [("Name", "Mei Lin"), ("Address them as", "小梅")]
    assert [f.text for f in card.facts] == ["Moved to Lyon in 2026"]
    done = revert_to(profile, version=4, slice_key=carded.key)
    card = parse(Card.objects.get(profile=profile).text)
    assert [f.text for f in card.facts] == ["Moved to Lyon in 2026", "Has a cat called Tofu"]
    assert "restored the card as it was at the end of slice" in done.run.summary
    assert EvolutionRun.objects.filter(trigger="hand_edit").count() == 4


def test_the_agent_may_not_undo_a_hand_edit_without_newer_evidence(profile, carded):
    remove_line(profile, version=1, key=key_of(profile, "Has a cat called Tofu"))
    add_line(profile, version=2, attr="lessons", text="Never call her Meimei")
    card = parse(Card.objects.get(profile=profile).text)
    ctx = Context(profile=profile, card=card, refs_exist=refs_resolver(profile))
    back = dispatch(ctx, "add_anchor_fact", '{"text": "Has a cat called Tofu", "refs": ["2026/08/17/0515"]}')
    assert not back.accepted and "the person removed “Has a cat called Tofu”" in back.message
    gone = dispatch(ctx, "remove_lesson", '{"index": 1}')
    assert not gone.accepted and "the person wrote “Never call her Meimei”" in gone.message
    assert rewrite_refusal(profile, card, "add_anchor_fact", {"text": "Plays the cello", "refs": [REF]}) is None
    fake = dispatch(ctx, "add_now", '{"text": "Busy", "refs": ["you"], "since": "2026-08-17"}')
    assert not fake.accepted and "[you]" in fake.message  # only the person cites the person


def test_a_removal_refused_for_the_persons_line_goes_through_with_newer_evidence_in_refs(profile, carded):
    add_line(profile, version=1, attr="lessons", text="Never call her Meimei")
    card = parse(Card.objects.get(profile=profile).text)
    ctx = Context(profile=profile, card=card, refs_exist=refs_resolver(profile))
    told = dispatch(ctx, "remove_lesson", '{"index": 1}')
    assert not told.accepted and "cite that newer slice in refs" in told.message
    older = dispatch(ctx, "remove_lesson", json.dumps({"index": 1, "refs": [carded.ref]}))
    assert not older.accepted and "the person wrote" in older.message  # before their edit: no evidence
    unknown = dispatch(ctx, "remove_lesson", '{"index": 1, "refs": ["2099/01/01/0000"]}')
    assert not unknown.accepted and "the person wrote" in unknown.message
    assert [lesson.text for lesson in ctx.card.lessons] == ["Never call her Meimei"]

    at = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=2)
    later = make_slice(profile, key=at.strftime("%Y-%m-%d-%H%M"), lines=[("user", "Meimei is fine now, really 😄")], at=at)
    done = dispatch(ctx, "remove_lesson", json.dumps({"index": 1, "refs": [later.ref]}))
    assert done.accepted and ctx.card.lessons == ()
    assert ctx.accepted[-1] == ("remove_lesson", {"index": 1})  # the evidence is not card text
    # Without a hand edit in the way, refs on a removal are evidence nobody needs: ignored.
    now_line = dispatch(ctx, "remove_now", json.dumps({"index": 1, "refs": [later.ref]}))
    assert now_line.accepted and ctx.card.now == ()


MINE = "Mei moved to Lyon for the pottery school and calls the cat Tofu her flatmate."


def test_the_agent_may_not_rewrite_the_portrait_the_person_wrote(profile, carded):
    set_portrait(profile, version=1, text=MINE)
    card = parse(Card.objects.get(profile=profile).text)
    ctx = Context(profile=profile, card=card, refs_exist=refs_resolver(profile))
    other = "Mei is an engineer who lives in Paris."

    over = dispatch(ctx, "set_portrait", json.dumps({"text": other}))
    assert not over.accepted and "the person wrote the Past portrait by hand" in over.message
    assert "Mei moved to Lyon for the pottery school" in over.message and "newer slice" in over.message
    old = dispatch(ctx, "set_portrait", json.dumps({"text": other, "refs": [carded.ref]}))
    assert not old.accepted  # evidence older than their edit is no evidence
    cut = dispatch(ctx, "set_portrait", json.dumps({"text": "Mei moved to Lyon."}))
    assert not cut.accepted  # a shorter portrait that drops most of their words is a rewrite
    assert ctx.card.portrait == MINE and not ctx.accepted

    kept = MINE + " She teaches a class on Thursdays."
    assert dispatch(ctx, "set_portrait", json.dumps({"text": kept})).accepted  # their words stay
    reworded = "She moved to Lyon for the pottery school; Mei calls Tofu the cat her flatmate."
    assert rewrite_refusal(profile, ctx.card, "set_portrait", {"text": reworded}) is None
    assert rewrite_refusal(profile, ctx.card, "set_portrait", {"text": other})  # still theirs inside

    at = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=2)
    later = make_slice(profile, key=at.strftime("%Y-%m-%d-%H%M"), lines=[("user", "I'm in Paris now, engineering")], at=at)
    newer = dispatch(ctx, "set_portrait", json.dumps({"text": other, "refs": [later.ref]}))
    assert newer.accepted and ctx.card.portrait == other
    assert ctx.accepted[-1] == ("set_portrait", {"text": other})  # the evidence is not card text
    assert f"added (Past portrait): {MINE}" in briefing(create_run(profile=profile, slice_=later, trigger="manual"), card)


def test_a_portrait_the_agent_wrote_or_a_fact_inside_it_binds_nothing(profile, carded):
    add_line(profile, version=1, attr="facts", text="Calls the cat Tofu her flatmate")
    card = parse(Card.objects.get(profile=profile).text)
    card = replace(card, portrait=MINE)
    assert rewrite_refusal(profile, card, "set_portrait", {"text": "Mei is an engineer."}) is None


def test_the_card_page_edits_without_javascript(logged_in, profile, carded):
    page = logged_in.get("/card/")
    assert_csp_clean(page)
    html = page.content.decode()
    assert 'name="action" value="edit"' in html and 'name="action" value="remove"' in html
    assert html.count('name="action" value="add"') == 5
    key = key_of(profile, "Learning pottery")
    response = logged_in.post("/card/edit/", {"action": "edit", "version": "1", "key": key, "text": "学陶艺，每周二"})
    assert response.status_code == 302
    page = logged_in.get(response["Location"]).content.decode()
    assert "学陶艺，每周二" in page and "you said so" in page
    refused = logged_in.post("/card/edit/", {"action": "add", "version": "2", "section": "horizon", "text": "Trip", "by": "soon"}, follow=True)
    assert "Not changed:" in refused.content.decode() and "YYYY-MM-DD" in refused.content.decode()
    timeline = logged_in.get("/timeline/").content.decode()
    assert "You corrected Now" in timeline


def test_a_refused_hand_edit_is_explained_in_the_persons_language(logged_in, profile, carded):
    key = key_of(profile, "Name: Mei")
    refused = logged_in.post("/card/edit/", {"action": "edit", "version": "1", "key": key, "text": "Name:  "},
                             follow=True, HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = refused.content.decode()
    assert "新的措辞是空的" in page and "the new wording is empty" not in page


# Issue 25 point 5 (K16, D7): the portrait the person replaced, or brought back by reverting.

AGENTS = "Mei is an engineer who lives in Paris and runs at dawn."


def with_portrait(profile, text):
    row = Card.objects.get(profile=profile)
    row.text = render(replace(parse(row.text), portrait=text))
    row.save()


def test_the_portrait_the_person_replaced_is_not_written_back(profile, carded):
    with_portrait(profile, AGENTS)
    set_portrait(profile, version=1, text=MINE)
    card = parse(Card.objects.get(profile=profile).text)
    # Their words kept, the replaced portrait brought back beside them: refused.
    refused = rewrite_refusal(profile, card, "set_portrait", {"text": f"{MINE} {AGENTS}"})
    assert refused and "removed" in refused and "Mei is an engineer" in refused
    # A fact that happens to share words with the old portrait is not bound by it.
    assert rewrite_refusal(profile, card, "add_anchor_fact", {"text": "Mei is an engineer", "refs": [REF]}) is None


def test_a_portrait_brought_back_by_reverting_is_the_persons(profile, carded):
    with_portrait(profile, MINE)
    snapshot_slice(carded)
    with_portrait(profile, AGENTS)  # the agent rewrote it later
    revert_to(profile, version=1, slice_key=carded.key)
    card = parse(Card.objects.get(profile=profile).text)
    assert card.portrait == MINE
    ctx = Context(profile=profile, card=card, refs_exist=refs_resolver(profile))
    back = dispatch(ctx, "set_portrait", json.dumps({"text": AGENTS}))
    assert not back.accepted and ctx.card.portrait == MINE


def test_staff_see_the_card_and_its_snapshots_read_only_with_the_way_to_the_card_page(admin_client, profile, carded):
    """Issue 25 point 5 (K3, K16, O1): the admin's raw card forms are gone."""
    row = Card.objects.get(profile=profile)
    page = admin_client.get(f"/admin/memory/card/{row.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200 and 'name="text"' not in html
    assert f'href="/card/?profile={profile.key}"' in html and "validated hand edits" in html
    before = row.text
    assert admin_client.post(f"/admin/memory/card/{row.pk}/change/", {"text": "raw", "version": 9}).status_code == 403
    assert Card.objects.get(pk=row.pk).text == before
    snapshot = snapshot_slice(carded)
    page = admin_client.get(f"/admin/memory/cardsnapshot/{snapshot.pk}/change/").content.decode()
    assert 'name="text"' not in page and "validated hand edits" in page
    assert admin_client.get("/admin/memory/card/add/").status_code == 403
