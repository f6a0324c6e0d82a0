"""K1: the v5 card format — parse, render, detect, stamp."""

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory.card.format import (
    CURRENT_FORMAT,
    Card,
    CardFormatError,
    Fact,
    Header,
    HorizonItem,
    IdentityLine,
    Lesson,
    NowItem,
    detect_format,
    empty_card,
    parse,
    render,
    stamp,
)
from tests.memory.card.samples import SEED_CARD


def test_k1_seed_example_round_trips_byte_for_byte():
    assert render(parse(SEED_CARD)) == SEED_CARD


def test_k1_seed_example_parses_into_its_sections():
    seed_card = parse(SEED_CARD)
    assert seed_card.header == Header("2026-08-17-0515", "user card v2", "2026-08-17T05:27:48Z")
    assert seed_card.identity == (
        IdentityLine("Name", "Alex"),
        IdentityLine("Address them as", "you"),
        IdentityLine("Alias", "小艾"),
    )
    assert seed_card.facts[1] == Fact(
        "Red line: no databases for single-user tools", ("2026/08/02/1105",)
    )
    assert seed_card.now == (
        NowItem(
            "Training for a 5K — Wednesday morning runs are a two-person thing now",
            ("2026/08/11/1426",),
            date(2026, 8, 11),
        ),
    )
    assert seed_card.horizon == (
        HorizonItem(
            "Draft the wedding speech for Lao Zhou", date(2026, 8, 21), ("2026/08/15/2030",)
        ),
    )
    assert seed_card.lessons[0].refs == ("2026/08/11/1426",)


def test_k1_wrapped_portrait_keeps_its_line_breaks():
    seed_card = parse(SEED_CARD)
    lines = seed_card.portrait.split("\n")
    assert len(lines) == 4
    assert lines[0] == "Alex is an engineer who prefers answers grounded in real evidence over"
    assert lines[-1].endswith("a north star they still hold today.")


def test_k1_empty_card_renders_every_section_and_parses_back():
    text = render(empty_card())
    assert text == (
        "# Previously On\n\n"
        f"_Active slice: none | Format: {CURRENT_FORMAT} | Updated: never_\n\n"
        "## Identity\n\n## Past\n\n## Now\n\n## Horizon\n\n## Self-model\n"
    )
    assert parse(text) == empty_card()


def test_k1_several_refs_render_comma_separated_and_parse_back():
    card = Card(lessons=(Lesson("先共情,再讲道理 🙂", ("2026/08/11/1426", "2026/08/15/2030")),))
    text = render(card)
    assert "- 先共情,再讲道理 🙂 — refs: [2026/08/11/1426], [2026/08/15/2030]\n" in text
    assert parse(text) == card


def test_k1_item_text_containing_the_separators_round_trips():
    card = Card(
        facts=(Fact("He wrote “— refs: [2026/01/01/0000]” in a doc", ("2026/08/11/1426",)),),
        now=(NowItem("a | since: b — refs: c", ("2026/08/11/1426",), date(2026, 8, 11)),),
        horizon=(HorizonItem("reply — by: Friday", date(2026, 8, 21), ("2026/08/15/2030",)),),
    )
    assert parse(render(card)) == card


def test_k1_identity_line_with_refs_round_trips():
    card = Card(identity=(IdentityLine("Pronouns", "they/them", ("2026/08/17/0515",)),))
    assert "- Pronouns: they/them — refs: [2026/08/17/0515]\n" in render(card)
    assert parse(render(card)) == card


def test_k1_card_without_final_newline_is_refused_with_the_line():
    with pytest.raises(CardFormatError, match="end with exactly one newline") as error:
        parse(SEED_CARD.rstrip("\n"))
    assert error.value.line == 31


def test_k1_extra_blank_line_is_refused_not_silently_normalised():
    with pytest.raises(CardFormatError, match=r"line 5: not in canonical v5 layout"):
        parse(SEED_CARD.replace("## Identity", "\n## Identity"))


def test_k1_trailing_space_in_a_value_is_kept_faithfully():
    text = SEED_CARD.replace("- Name: Alex\n", "- Name: Alex \n")
    assert parse(text).identity[0].value == "Alex "
    assert render(parse(text)) == text


def test_k1_unknown_section_is_refused_naming_it():
    text = SEED_CARD.replace("## Horizon", "## Notes\n\n- hello\n\n## Horizon")
    with pytest.raises(CardFormatError, match=r"line 25: unexpected heading '## Notes'"):
        parse(text)


def test_k1_missing_section_is_refused():
    text = SEED_CARD.replace(
        "## Horizon\n\n- Draft the wedding speech for Lao Zhou — by: "
        "2026-08-21 — refs: [2026/08/15/2030]\n\n",
        "",
    )
    with pytest.raises(CardFormatError, match="sections are Identity, Past, Now, Self-model"):
        parse(text)


def test_k1_free_text_inside_a_list_section_is_refused_not_dropped():
    text = SEED_CARD.replace("## Now\n\n", "## Now\n\nSome stray note\n")
    with pytest.raises(CardFormatError, match=r"line 23: expected '- text — refs:"):
        parse(text)


def test_k1_item_without_refs_is_refused():
    text = SEED_CARD.replace(" — refs: [2026/08/02/1105]", "")
    with pytest.raises(CardFormatError, match=r"line 19: expected '- fact — refs:"):
        parse(text)


def test_k1_impossible_ref_date_is_refused():
    text = SEED_CARD.replace("[2026/08/02/1105]", "[2026/02/30/1105]")
    with pytest.raises(CardFormatError, match=r"line 19: ref \[2026/02/30/1105\] is not a valid"):
        parse(text)


def test_k1_unknown_format_label_is_refused():
    with pytest.raises(CardFormatError, match="format 'user card v1' is not the v5 layout"):
        parse(SEED_CARD.replace("user card v2", "user card v1"))


def test_k1_second_portrait_paragraph_is_refused():
    text = SEED_CARD.replace("still hold today.\n", "still hold today.\n\nA second paragraph.\n")
    with pytest.raises(CardFormatError, match="one portrait paragraph"):
        parse(text)


def test_k10_detect_format_calls_the_seed_layout_v5():
    assert detect_format(SEED_CARD) == "v5"


def test_k10_detect_format_calls_blank_text_empty():
    assert detect_format("") == "empty"
    assert detect_format(" \n\n") == "empty"


def test_k10_detect_format_calls_free_form_notes_legacy():
    assert detect_format("Alex likes running. 喜欢跑步。\n") == "legacy"


def test_k10_detect_format_calls_a_pre_v5_card_legacy():
    old = "# Previously On\n\n## Who\n\n- Alex\n\n## Notes\n\n- runs on Wednesdays\n"
    assert detect_format(old) == "legacy"


def test_stamp_sets_slice_current_format_and_utc_time():
    seed_card = parse(SEED_CARD)
    at = datetime(2026, 8, 18, 9, 30, 5, tzinfo=timezone(timedelta(hours=8)))
    stamped = stamp(seed_card, active_slice="2026-08-18-0900", at=at)
    assert stamped.header == Header("2026-08-18-0900", CURRENT_FORMAT, "2026-08-18T01:30:05Z")
    assert replace(stamped, header=seed_card.header) == seed_card


def test_stamp_refuses_a_naive_time():
    seed_card = parse(SEED_CARD)
    with pytest.raises(ValueError, match="aware"):
        stamp(seed_card, active_slice="2026-08-18-0900", at=datetime(2026, 8, 18))


def test_stamp_refuses_a_malformed_slice_id():
    seed_card = parse(SEED_CARD)
    with pytest.raises(ValueError, match="YYYY-MM-DD-HHMM"):
        stamp(seed_card, active_slice="2026/08/18/0900", at=datetime(2026, 8, 18, tzinfo=UTC))


def test_k1_stamped_card_round_trips():
    seed_card = parse(SEED_CARD)
    stamped = stamp(seed_card, active_slice="2026-08-18-0900", at=datetime(2026, 8, 18, tzinfo=UTC))
    assert parse(render(stamped)) == stamped


SEED_DOC = Path(__file__).resolve().parents[3].parent / "shared/seeds/000_6b880cc6c8736b87.txt"


@pytest.mark.skipif(not SEED_DOC.exists(), reason="shared/ seeds are not beside the repository")
def test_k1_the_embedded_example_is_the_seed_documents_own():
    assert SEED_CARD in SEED_DOC.read_text(encoding="utf-8")
