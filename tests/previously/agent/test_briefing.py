"""K14: the arrival briefing greets by the card's name and raises overdue Horizon items."""

from datetime import UTC, datetime

import pytest

from memory.models import Message
from previously.agent.briefing import arrival_briefing
from tests.factories import MessageFactory
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import make_slice, set_card

pytestmark = pytest.mark.django_db
LATER = datetime(2026, 8, 24, 9, 0, tzinfo=UTC)


def test_greets_by_name_and_asks_about_overdue_items_in_english(profile):
    profile.language = "en"
    profile.save()
    set_card(profile, SEED_CARD)
    slice_ = make_slice(profile, "2026-08-24-0900", closed=False, at=LATER)

    text = arrival_briefing(profile, slice_, now=LATER)

    # The card's values are quoted: the briefing comes after the safety boundary (S5).
    assert "Greet them by name, <<< Alex >>> (address them as: <<< you >>>)." in text
    assert "<<< Draft the wedding speech for Lao Zhou >>> (by 2026-08-21, 3 days overdue)" in text


def test_chinese_profiles_get_a_chinese_briefing(profile):
    set_card(profile, SEED_CARD)
    slice_ = make_slice(profile, "2026-08-24-0900", closed=False, at=LATER)

    text = arrival_briefing(profile, slice_, now=LATER)

    assert "用名字「<<< Alex >>>」问候对方" in text
    assert "已逾期 3 天" in text


def test_nothing_after_the_first_reply_or_on_an_empty_card(profile):
    slice_ = make_slice(profile, "2026-08-24-0900", closed=False, at=LATER)
    assert arrival_briefing(profile, slice_, now=LATER) is None
    set_card(profile, SEED_CARD)
    MessageFactory(profile=profile, slice=slice_, speaker=Message.Speaker.ASSISTANT, mid="a_1760000000000_abc")
    assert arrival_briefing(profile, slice_, now=LATER) is None
