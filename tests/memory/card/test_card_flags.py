"""K5/K6: stale Now and overdue Horizon items are flagged, never acted on; usage."""

from dataclasses import replace
from datetime import date

from memory.card.flags import Flag, flags, usage
from memory.card.format import HorizonItem, NowItem, parse
from tests.memory.card.samples import SEED_CARD

SEED = parse(SEED_CARD)  # Now since 2026-08-11, Horizon by 2026-08-21


def test_k5_a_now_item_seven_days_old_is_not_yet_stale():
    assert flags(SEED, today=date(2026, 8, 18)) == []


def test_k5_a_now_item_older_than_seven_days_is_flagged_stale():
    assert flags(SEED, today=date(2026, 8, 19)) == [
        Flag(
            "Now",
            1,
            "stale",
            8,
            "Now 1 is 8 days old (since 2026-08-11): 'Training for a 5K — Wednesday morning runs are"
            " a two-person thing now' — stale: promote to Past (promote_now) or drop (remove_now)",
        )
    ]


def test_k6_a_horizon_item_due_today_is_not_overdue():
    assert [f for f in flags(SEED, today=date(2026, 8, 21)) if f.section == "Horizon"] == []


def test_k6_a_horizon_item_past_its_by_date_is_flagged_overdue():
    [flag] = [f for f in flags(SEED, today=date(2026, 8, 22)) if f.section == "Horizon"]
    assert flag == Flag(
        "Horizon",
        1,
        "overdue",
        1,
        "Horizon 1 is overdue by 1 day (by 2026-08-21): 'Draft the wedding speech for Lao Zhou'"
        " — keep it; ask the user how it went, then resolve_horizon",
    )


def test_k5_k6_flags_carry_the_one_based_index_the_tools_take():
    card = replace(
        SEED,
        now=(
            NowItem("fresh", ("2026/08/17/0515",), date(2026, 8, 30)),
            *SEED.now,
        ),
        horizon=(*SEED.horizon, HorizonItem("later", date(2026, 12, 1), ("2026/08/17/0515",))),
    )
    assert [(f.section, f.index, f.kind) for f in flags(card, today=date(2026, 9, 1))] == [
        ("Now", 2, "stale"),
        ("Horizon", 1, "overdue"),
    ]


def test_k5_k6_computing_flags_never_changes_the_card():
    card = parse(SEED_CARD)
    flags(card, today=date(2027, 1, 1))
    assert card == SEED


def test_k2_usage_reports_every_section_against_its_limit():
    assert usage(SEED) == (
        "Identity 3/8 lines\n"
        "Past portrait chars 277/2400\n"
        "Past anchor facts 2/8\n"
        "Now 1/5\n"
        "Horizon 1/10\n"
        "Self-model lessons 1/10"
    )
