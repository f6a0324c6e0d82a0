"""add_highlight (SPEC C1, C2): verbatim or refused, one function for every path."""

import pytest

from memory.curation import HighlightRefused, add_highlight
from memory.models import Highlight
from tests.factories import MessageFactory

pytestmark = pytest.mark.django_db


def test_a_verbatim_quote_of_a_message_becomes_a_highlight():
    message = MessageFactory(content="我的猫叫 Mochi，三岁了")
    highlight = add_highlight(profile=message.profile, text="猫叫 Mochi", source="user", message=message)
    assert (highlight.mid, highlight.content, highlight.source) == (message.mid, "猫叫 Mochi", "user")


def test_a_quote_not_in_the_message_is_refused_with_a_reason():
    message = MessageFactory(content="hello there")
    with pytest.raises(HighlightRefused, match="verbatim"):
        add_highlight(profile=message.profile, text="hello world", source="user", message=message)
    assert Highlight.objects.count() == 0


def test_the_check_is_case_sensitive_even_on_sqlite():
    message = MessageFactory(content="Hello There")
    with pytest.raises(HighlightRefused):
        add_highlight(profile=message.profile, text="hello there", source="assistant", candidates=[message])


def test_without_strict_mid_a_non_verbatim_quote_is_kept(settings):
    settings.STRICT_MID = False
    message = MessageFactory(content="hello there")
    assert add_highlight(profile=message.profile, text="paraphrase", source="import", message=message).message == message


def test_the_newest_candidate_quoting_the_text_is_the_source():
    old = MessageFactory(content="see you tomorrow", created_at="2026-01-01T00:00Z")
    new = MessageFactory(profile=old.profile, slice=old.slice, content="ok, see you tomorrow!", created_at="2026-01-02T00:00Z")
    other = MessageFactory(profile=old.profile, slice=old.slice, content="unrelated", created_at="2026-01-03T00:00Z")
    assert add_highlight(profile=old.profile, text="see you tomorrow", source="assistant", candidates=[old, new, other]).message == new


def test_the_same_quote_twice_is_one_highlight():
    message = MessageFactory(content="a lovely day")
    first = add_highlight(profile=message.profile, text="lovely day", source="user", message=message)
    assert add_highlight(profile=message.profile, text="lovely day", source="assistant", message=message) == first
    assert Highlight.objects.count() == 1


def test_another_profiles_or_a_deleted_message_cannot_be_quoted():
    message = MessageFactory(content="mine", deleted_at="2026-01-01T00:00Z")
    with pytest.raises(HighlightRefused):
        add_highlight(profile=message.profile, text="mine", source="user", message=message)
    theirs = MessageFactory(content="theirs")
    with pytest.raises(HighlightRefused):
        add_highlight(profile=message.profile, text="theirs", source="user", message=theirs)
