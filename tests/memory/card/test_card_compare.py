"""K7: the card is written back only when its substance changed."""

from datetime import UTC, datetime

from memory.card.compare import same_substance
from memory.card.format import parse, render, stamp
from memory.card.mutations import remove_now
from tests.memory.card.samples import SEED_CARD

SEED = parse(SEED_CARD)


def test_k7_a_new_updated_timestamp_alone_is_not_a_change():
    later = SEED_CARD.replace("2026-08-17T05:27:48Z", "2026-08-18T09:00:00Z")
    assert same_substance(SEED_CARD, later)


def test_k7_an_edited_item_is_a_change():
    edited = SEED_CARD.replace("Lao Zhou", "老周")
    assert not same_substance(SEED_CARD, edited)


def test_k7_a_different_active_slice_is_a_change():
    moved = SEED_CARD.replace("2026-08-17-0515", "2026-08-18-0900")
    assert not same_substance(SEED_CARD, moved)


def test_k7_cards_compare_like_their_text():
    assert same_substance(SEED, render(SEED))
    assert not same_substance(SEED, remove_now(SEED, index=1).card)


def test_k7_restamping_an_unchanged_card_with_a_new_time_is_no_change():
    a = stamp(SEED, active_slice="2026-08-18-0900", at=datetime(2026, 8, 18, 9, tzinfo=UTC))
    b = stamp(SEED, active_slice="2026-08-18-0900", at=datetime(2026, 8, 18, 10, tzinfo=UTC))
    assert same_substance(a, b)


def test_k7_legacy_text_is_compared_verbatim():
    assert same_substance("free notes", "free notes")
    assert not same_substance("free notes", "free notes!")
