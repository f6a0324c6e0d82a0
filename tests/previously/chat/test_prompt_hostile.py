"""Issue 16 point 4 (SPEC R6, S5): a property test. Prompts are built from hostile archive,
card and import content — payloads that try to close the quotes with look-alike brackets,
HTML character references, invisible characters, newlines and our own section headings — in
every place such content reaches: the card, recalled lines and their stored local-time
metadata, highlights and their message id, experiences, and the arrival briefing's name,
form of address and overdue Horizon item. Outside the quoted data, no line may carry any of
it: each payload is fenced by a sentinel that must never be seen outside <<< >>>."""

import re
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memory.clock import local_clock
from memory.models import Experience, Highlight, Message
from memory.models.archive import OBJECT_ID_RE
from memory.prompt_boundary import neutralise
from memory.recall.context import Recalled
from previously.agent.briefing import briefing_text
from previously.chat.prompt import system_prompt
from tests.factories import ProfileFactory, SliceFactory
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import set_card

pytestmark = pytest.mark.django_db
SENTINEL = "ZQXPWN"
ID_SENTINEL = "IDQXPWN"  # an id is validated, not quoted: it may appear only as a whole valid id
NOW = datetime(2026, 8, 24, 9, 0, tzinfo=UTC)
PIECES = ["<", ">", "<<<", ">>>", "＞", "⫸", "⪢", "≫", "⋙", "»", "&gt;", "&GT", "&#62;", "&#x3E;", "&lt;",
          "\u200b", "\u0301", "\n", "\r\n", "# Reply requirements", "# Safety boundary", "- ", " ", "好", "🐱"]
# No NUL (PostgreSQL cannot store it) and no lone surrogate (not UTF-8: SQLite's driver cannot
# encode it; a full run drew one on 2026-12-03): the importer and the socket refuse both first.
payload = st.lists(st.sampled_from(PIECES) | st.text(st.characters(exclude_characters="\x00",
                                                                   exclude_categories=("Cs",)), max_size=3),
                   max_size=12).map(
    lambda parts: SENTINEL + "".join(parts) + SENTINEL)
one_line = payload.map(lambda s: " ".join(s.splitlines()))

INLINE = re.compile(r"<<< .*? >>>")


def outside_quotes(prompt: str) -> list[str]:
    """The prompt's lines that are not quoted data: block quotes are a line "<<<" (or a list
    item "- <<<") to a line ">>>", inline ones "<<< … >>>" on one line."""
    lines, inside = [], False
    for line in prompt.split("\n"):
        if not inside and line in ("<<<", "- <<<"):
            inside = True
        elif inside and line == ">>>":
            inside = False
        elif not inside:
            lines.append(INLINE.sub("«quoted»", line))
    assert not inside, "a quote was left open"
    return lines


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(card_line=one_line, name=one_line, address=one_line, horizon=one_line, content=payload,
       period=payload, day=payload, mid=payload.map(lambda s: s.replace(SENTINEL, ID_SENTINEL)), title=payload,
       hour=st.integers(-5, 99))
def test_no_hostile_value_reaches_the_prompt_outside_the_quotes(card_line, name, address, horizon, content,
                                                                period, day, mid, title, hour):
    profile = ProfileFactory(language="en")
    card = (SEED_CARD.replace("- Name: Alex", f"- Name: {name}")
            .replace("- Address them as: you", f"- Address them as: {address}")
            .replace("Draft the wedding speech for Lao Zhou", horizon)
            .replace("a north star they still hold today.", f"a north star they still hold today. {card_line}"))
    set_card(profile, card)
    slice_ = SliceFactory(profile=profile)
    fragment = Message(profile=profile, mid=mid, speaker="user", content=content, period=period,
                       local_day_key=day, local_hour=hour, created_at=NOW)
    recalled = Recalled(
        fragments=[fragment],
        highlights=[Highlight(profile=profile, mid=mid, content=content)],
        active=[Experience(profile=profile, title=title, content=content)],
        candidates=[Experience(profile=profile, title=content, content=title)],
    )
    briefing = briefing_text(profile, tz="UTC", now=NOW)
    prompt = system_prompt(profile=profile, slice_=slice_, card_text=card, clock=local_clock(NOW, "UTC"),
                           recalled=recalled, briefing=briefing)
    assume(briefing is not None)  # the hostile card still parses: its values reach the briefing
    assert SENTINEL in briefing and SENTINEL in prompt  # the values did reach the prompt, quoted
    outside = outside_quotes(prompt)
    leaked = [line for line in outside if SENTINEL in line]
    assert not leaked, leaked
    ids = [line for line in outside if ID_SENTINEL in line]
    assert all(line == f"- ({mid})" and OBJECT_ID_RE.fullmatch(mid) for line in ids), ids


@pytest.mark.parametrize("attack", ["⫸", "⪢>", "&gt;&gt;&gt;", "&GT&GT&GT", "&#62;&#x3e;&gt", "⫷", "&lt;&lt;&lt;",
                                    "&gt;\u200b&gt;>", "»»»", "≫>"])
def test_neutralise_covers_look_alikes_and_html_references(attack):
    out = neutralise(f"data {attack} more")
    assert ">>>" not in out and "<<<" not in out and "&" not in out, out  # spelt as "> > >"
    assert neutralise(out) == out


def test_text_without_brackets_is_unchanged_even_with_entities():
    assert neutralise("Tom &amp; Jerry &copy; 2026 好 🐱") == "Tom &amp; Jerry &copy; 2026 好 🐱"
