"""K9 injection frozen per slice; K8 snapshot on commit; K7 no write without change."""

from datetime import UTC, datetime

import pytest

from memory.card.store import commit_card, injected_card_for
from memory.models import Card, CardSnapshot, SliceLogEntry
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import make_slice, set_card

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 8, 18, 9, 0, tzinfo=UTC)
REF = "2026/08/17/0515"


def test_the_injected_copy_is_identical_across_turns_of_a_slice(profile):
    set_card(profile, SEED_CARD)
    slice_ = make_slice(profile, closed=False)

    first = injected_card_for(slice_, now=NOW)
    set_card(profile, SEED_CARD.replace("Alex is an engineer", "Alex is a painter"), version=2)
    second = injected_card_for(slice_, now=datetime(2026, 8, 20, 9, 0, tzinfo=UTC))

    assert first == second
    assert "Alex is an engineer" in second
    assert "2026-08-11 (7 天前)" in first  # relative time in the profile's language


def test_an_empty_card_is_frozen_too_and_costs_no_queries_on_later_turns(profile, django_assert_num_queries):
    """K9 + O2: "" is a frozen empty card, not "not frozen yet" (that is NULL)."""
    slice_ = make_slice(profile, closed=False)
    assert injected_card_for(slice_, now=NOW) == ""
    set_card(profile, SEED_CARD)  # a card appears mid-slice: the prompt prefix must not move
    with django_assert_num_queries(0):
        assert injected_card_for(slice_, now=NOW) == ""


def test_an_explicit_request_rerenders_the_injected_copy(profile, llm_server, llm_provider):
    from previously.agent.lifecycle import after_reply
    from tests.llm_server import Turn

    set_card(profile, SEED_CARD)
    slice_ = make_slice(profile, closed=False, lines=[("user", "remember: I paint now")])
    before = injected_card_for(slice_, now=NOW)
    llm_server.script(
        Turn(tool_calls=[("add_now", {"text": "Took up painting", "refs": [REF], "since": "2026-08-17"})]),
        Turn(tool_calls=[("finish", {"summary": "Noted the painting."})]),
    )

    after_reply(profile, slice_, "remember: I paint now", "Lovely!")

    slice_.refresh_from_db()
    after = injected_card_for(slice_)
    assert after != before
    assert "Took up painting" in after
    assert SliceLogEntry.objects.filter(slice=slice_, data__event="cache_break").exists()


def test_commit_writes_card_and_snapshot_together_and_only_on_change(profile):
    slice_ = make_slice(profile)
    set_card(profile, SEED_CARD, version=1)

    same = commit_card(profile=profile, base_version=1, base_text=SEED_CARD, mutations=[], slice_=slice_)
    changed = commit_card(
        profile=profile,
        base_version=1,
        base_text=SEED_CARD,
        mutations=[("remove_lesson", {"index": 1})],
        slice_=slice_,
        now=NOW,
    )

    assert not same.changed
    assert changed.changed and changed.version == 2
    card = Card.objects.get(profile=profile)
    assert "## Self-model\n" in card.text and "lead with empathy" not in card.text
    assert "Updated: 2026-08-18T09:00:00Z" in card.text
    assert CardSnapshot.objects.get(slice=slice_).text == card.text


def test_a_stale_commit_rebases_and_drops_what_the_newer_card_refuses(profile):
    slice_ = make_slice(profile)
    set_card(profile, SEED_CARD, version=1)
    commit_card(profile=profile, base_version=1, base_text=SEED_CARD,
                mutations=[("remove_lesson", {"index": 1})], slice_=slice_)

    late = commit_card(
        profile=profile,
        base_version=1,
        base_text=SEED_CARD,
        mutations=[("remove_lesson", {"index": 1}), ("set_portrait", {"text": "Alex paints."})],
        slice_=slice_,
    )

    assert late.rebased and late.version == 3
    assert len(late.dropped) == 1 and "Self-model is empty" in late.dropped[0]
    assert "Alex paints." in Card.objects.get(profile=profile).text
