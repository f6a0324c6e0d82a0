"""K9: the injected copy adds relative times in the user's clock; pure and per-slice stable."""

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from memory.card.format import Card, Header, parse, render
from memory.card.inject import relative_day, render_injected
from tests.memory.card.samples import SEED_CARD

SEED = parse(SEED_CARD)
SHANGHAI = timezone(timedelta(hours=8))
NOW = datetime(2026, 8, 24, 8, 0, tzinfo=SHANGHAI)


def test_k9_chinese_copy_marks_refs_and_dates_in_days():
    text = render_injected(SEED, now=NOW, language="zh")
    assert (
        "- Training for a 5K — Wednesday morning runs are a two-person thing now"
        " — refs: [2026/08/11/1426] (13 天前) | since: 2026-08-11 (13 天前)\n"
    ) in text
    assert (
        "- Draft the wedding speech for Lao Zhou — by: 2026-08-21 (3 天前,已逾期)"
        " — refs: [2026/08/15/2030] (9 天前)\n"
    ) in text


def test_k9_english_copy_marks_refs_and_dates_in_days():
    text = render_injected(SEED, now=NOW, language="en")
    assert "— refs: [2026/07/26/1539] (29 days ago)\n" in text
    assert "— by: 2026-08-21 (3 days ago, overdue) — refs:" in text


def test_k9_future_deadline_reads_as_in_n_days():
    text = render_injected(SEED, now=datetime(2026, 8, 19, 12, tzinfo=SHANGHAI), language="en")
    assert "— by: 2026-08-21 (in 2 days) — refs:" in text
    text = render_injected(SEED, now=datetime(2026, 8, 19, 12, tzinfo=SHANGHAI), language="zh")
    assert "— by: 2026-08-21 (2 天后) — refs:" in text


def test_k9_the_updated_stamp_is_read_in_the_users_clock():
    card = Card(header=Header("2026-08-17-0515", "user card v5", "2026-08-17T23:30:00Z"))
    late_utc_is_next_morning = render_injected(
        card, now=datetime(2026, 8, 18, 9, tzinfo=SHANGHAI), language="en"
    )
    assert "Updated: 2026-08-17T23:30:00Z (today)_" in late_utc_is_next_morning


def test_k9_the_stored_card_keeps_plain_iso_dates():
    render_injected(SEED, now=NOW, language="zh")
    assert render(SEED) == SEED_CARD


def test_k9_same_inputs_give_byte_identical_copies():
    assert render_injected(SEED, now=NOW, language="zh") == render_injected(
        parse(SEED_CARD), now=NOW, language="zh-CN"
    )


def test_k9_a_naive_now_is_refused():
    with pytest.raises(ValueError, match="aware"):
        render_injected(SEED, now=datetime(2026, 8, 24), language="en")


def test_k9_an_unsupported_language_is_refused():
    with pytest.raises(ValueError, match="'fr'"):
        render_injected(SEED, now=NOW, language="fr")


@pytest.mark.parametrize(
    ("day", "en", "zh"),
    [
        (date(2026, 8, 24), "today", "今天"),
        (date(2026, 8, 23), "yesterday", "昨天"),
        (date(2026, 8, 25), "tomorrow", "明天"),
        (date(2026, 8, 21), "3 days ago", "3 天前"),
        (date(2026, 8, 26), "in 2 days", "2 天后"),
        (date(2026, 6, 26), "59 days ago", "59 天前"),
        (date(2026, 4, 1), "about 4 months ago", "约 4 个月前"),
        (date(2026, 12, 31), "in about 4 months", "约 4 个月后"),
        (date(2023, 8, 1), "about 3 years ago", "约 3 年前"),
    ],
)
def test_k9_relative_day_wording(day, en, zh):
    today = date(2026, 8, 24)
    assert relative_day(day, today=today, language="en") == en
    assert relative_day(day, today=today, language="zh") == zh


def test_k9_a_never_evolved_card_says_never():
    text = render_injected(Card(), now=datetime(2026, 8, 24, tzinfo=UTC), language="en")
    assert "| Updated: never_" in text
