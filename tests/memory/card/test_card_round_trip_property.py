"""K1: render/parse round-trip byte-exact for any card, in any script (property test)."""

from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.card.format import (
    ACCEPTED_FORMATS,
    Card,
    Fact,
    Header,
    HorizonItem,
    IdentityLine,
    Lesson,
    NowItem,
    parse,
    render,
)
from memory.card.mutations import apply_tool, set_portrait

# Characters a card meets: CJK, emoji (incl. ZWJ parts), the format's own separators,
# plus anything else Unicode offers except line breaks inside one-line fields.
TRICKY = list("小艾老周跑步共情🙂🏃‍♀️💍😭—–|:[]/-#_* \t") + [
    " — refs: ",
    " | since: ",
    " — by: ",
    " — refs: [2026/08/11/1426]",
    "[2026/08/11/1426]",
    " | since: 2026-08-11",
    " — by: 2026-08-21",
]
char = st.one_of(
    st.sampled_from(TRICKY),
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
)
line = st.lists(char, min_size=1, max_size=20).map("".join).map(str.strip).filter(bool)
refs = st.lists(
    st.builds(
        lambda d, h, m: f"{d:%Y/%m/%d}/{h:02d}{m:02d}",
        st.dates(date(2000, 1, 1), date(2099, 12, 31)),
        st.integers(0, 23),
        st.integers(0, 59),
    ),
    min_size=1,
    max_size=3,
    unique=True,
).map(tuple)
days = st.dates(date(2000, 1, 1), date(2099, 12, 31))

# Identity is the one line whose refs are optional, so its value may not fake a refs suffix.
field = line.map(lambda s: s.replace(":", "").strip()).filter(bool)


def _no_refs_suffix(text: str) -> str:
    while " — refs: " in text:
        text = text.replace(" — refs: ", " — ")
    return text.strip()


value = line.map(_no_refs_suffix).filter(bool)
identity = st.builds(IdentityLine, field, value, st.one_of(st.just(()), refs))
# A portrait is whatever set_portrait accepts.
portrait = st.one_of(
    st.just(""),
    st.lists(line.map(lambda s: s.lstrip("#- ")).filter(bool), min_size=1, max_size=3)
    .map("\n".join)
    .filter(lambda text: set_portrait(Card(), text=text).card.portrait == text),
)
header = st.builds(
    Header,
    st.one_of(st.just("none"), days.map(lambda d: f"{d:%Y-%m-%d}-0930")),
    st.sampled_from(ACCEPTED_FORMATS),
    st.one_of(st.just("never"), days.map(lambda d: f"{d:%Y-%m-%d}T05:27:48Z")),
)
cards = st.builds(
    Card,
    header=header,
    identity=st.lists(identity, max_size=3).map(tuple),
    portrait=portrait,
    facts=st.lists(st.builds(Fact, line, refs), max_size=3).map(tuple),
    now=st.lists(st.builds(NowItem, line, refs, days), max_size=3).map(tuple),
    horizon=st.lists(st.builds(HorizonItem, line, days, refs), max_size=3).map(tuple),
    lessons=st.lists(st.builds(Lesson, line, refs), max_size=3).map(tuple),
)


# Section sizes stay small: the limits are the mutations' business, not the format's,
# and small cards let hypothesis explore more text.
@settings(max_examples=200, deadline=None, database=None)
@given(cards)
def test_k1_render_and_parse_round_trip_for_any_card(card):
    text = render(card)
    assert parse(text) == card
    assert render(parse(text)) == text


# Any sequence of tool calls — with hostile text — leaves a card that still round-trips:
# validation inside the mutations is what keeps the format safe (K3).
texts = st.one_of(line, st.lists(char, max_size=40).map("".join), st.sampled_from(TRICKY))
calls = st.one_of(
    st.tuples(
        st.just("set_identity"),
        st.fixed_dictionaries({"field": texts, "value": texts, "refs": refs.map(list)}),
    ),
    st.tuples(
        st.just("set_portrait"),
        st.fixed_dictionaries({"text": st.lists(texts, max_size=4).map("\n".join)}),
    ),
    st.tuples(
        st.just("add_anchor_fact"), st.fixed_dictionaries({"text": texts, "refs": refs.map(list)})
    ),
    st.tuples(
        st.just("add_now"),
        st.fixed_dictionaries({"text": texts, "refs": refs.map(list), "since": days.map(str)}),
    ),
    st.tuples(
        st.just("add_horizon"),
        st.fixed_dictionaries({"text": texts, "by": days.map(str), "refs": refs.map(list)}),
    ),
    st.tuples(
        st.just("add_lesson"), st.fixed_dictionaries({"text": texts, "refs": refs.map(list)})
    ),
    st.tuples(
        st.sampled_from(["remove_now", "remove_anchor_fact", "remove_lesson"]),
        st.fixed_dictionaries({"index": st.integers(-1, 4)}),
    ),
    st.tuples(
        st.just("promote_now"),
        st.fixed_dictionaries({"index": st.integers(0, 3), "refs": refs.map(list), "text": texts}),
    ),
    st.tuples(
        st.just("resolve_horizon"),
        st.fixed_dictionaries({"index": st.integers(0, 3), "outcome": texts}),
    ),
)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(calls, max_size=12))
def test_k3_any_sequence_of_tool_calls_keeps_the_card_round_trippable(sequence):
    card = Card()
    for name, arguments in sequence:
        result = apply_tool(card, name, arguments, refs_exist=lambda refs: set())
        assert result.accepted or result.card is card
        card = result.card
        assert parse(render(card)) == card
