"""Recall v1 (SPEC R2-R4): relevance over the whole archive, recency only when asked."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from memory.archive import archive_message
from memory.models import Experience, Highlight, Message
from memory.recall import recall
from memory.recall.budget import approx_tokens
from memory.recall.context import CURATED_SCAN_LIMIT
from memory.recall.index import remove_messages
from tests.factories import ExperienceFactory, HighlightFactory, ProfileFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def say(profile, n, text, at, speaker="user"):
    mid = f"c_{n:016x}" if speaker == "user" else f"a_{1700000000000 + n}_x{n:03d}"
    return archive_message(profile=profile, mid=mid, speaker=speaker, content=text, created_at=at, tz="UTC").message


def texts(recalled):
    return [m.content for m in recalled.fragments]


def test_relevance_beats_recency_in_english():
    profile = ProfileFactory()
    say(profile, 1, "My dentist appointment is on Friday at the clinic", NOW - timedelta(days=200))
    say(profile, 2, "Friday was fun", NOW - timedelta(hours=1))
    got = texts(recall(profile=profile, query="when is my dentist appointment?", now=NOW))
    assert got[0] == "My dentist appointment is on Friday at the clinic"


def test_relevance_beats_recency_in_chinese():
    profile = ProfileFactory()
    say(profile, 1, "我下周三要交季度报告", NOW - timedelta(days=90))
    say(profile, 2, "下周去爬山", NOW - timedelta(hours=2))
    got = texts(recall(profile=profile, query="季度报告什么时候交？", now=NOW))
    assert got[0] == "我下周三要交季度报告"


def test_an_old_relevant_line_is_found_among_many_newer_ones_r2():
    profile = ProfileFactory()
    say(profile, 1, "my grandmother's recipe for dumplings uses chives", NOW - timedelta(days=800))
    for i in range(2, 502):
        say(profile, i, f"ordinary chat number {i} about the weather and work", NOW - timedelta(minutes=600 - i))
    assert texts(recall(profile=profile, query="grandmother dumplings recipe", now=NOW))[0].startswith("my grandmother")


def test_deleted_lines_are_never_returned_d3():
    profile = ProfileFactory()
    gone = say(profile, 1, "the secret code is pineapple", NOW - timedelta(days=3))
    soft = say(profile, 2, "pineapple pizza opinion", NOW - timedelta(days=2))
    remove_messages([gone.pk])
    Message.objects.filter(pk=gone.pk).delete()
    Message.objects.filter(pk=soft.pk).update(deleted_at=timezone.now())  # hidden but still indexed
    assert texts(recall(profile=profile, query="pineapple", now=NOW)) == []


def test_the_current_turn_is_excluded():
    profile = ProfileFactory()
    current = say(profile, 1, "tell me about penguins", NOW)
    assert texts(recall(profile=profile, query=current.content, now=NOW, exclude_ids=[current.pk])) == []


def test_offline_system_replies_are_not_recalled_as_memories():
    profile = ProfileFactory()
    archive_message(profile=profile, mid="a_1700000000000_sys1", speaker="assistant", content="Offline — penguins", message_type="system", created_at=NOW)
    assert texts(recall(profile=profile, query="penguins", now=NOW)) == []


def test_asking_about_yesterday_brings_yesterdays_lines_first():
    profile = ProfileFactory()
    say(profile, 1, "we talked about the movie Dune", NOW - timedelta(days=40))
    say(profile, 2, "I watched a movie with Sam", NOW - timedelta(days=1))
    say(profile, 3, "lunch was noodles", NOW - timedelta(days=1, hours=1))
    got = texts(recall(profile=profile, query="what movie did I mention yesterday?", now=NOW))
    assert got[0] == "I watched a movie with Sam" and "lunch was noodles" in got


def test_asking_about_yesterday_in_chinese():
    profile = ProfileFactory()
    say(profile, 1, "上个月看了电影", NOW - timedelta(days=30))
    say(profile, 2, "今天中午吃了饺子", NOW - timedelta(days=1))
    assert texts(recall(profile=profile, query="我昨天说了什么？", now=NOW))[0] == "今天中午吃了饺子"


def test_last_time_fuses_recency_into_the_relevant_lines():
    profile = ProfileFactory()
    say(profile, 1, "we planned the trip to Kyoto", NOW - timedelta(days=300))
    say(profile, 2, "the trip to Kyoto is booked", NOW - timedelta(days=2))
    got = texts(recall(profile=profile, query="last time, what did we say about the trip to Kyoto?", now=NOW))
    assert got[:2] == ["the trip to Kyoto is booked", "we planned the trip to Kyoto"]


def test_without_a_time_question_recency_only_breaks_ties():
    profile = ProfileFactory()
    say(profile, 1, "orange cat", NOW - timedelta(days=5))
    say(profile, 2, "orange cat", NOW - timedelta(days=1))
    got = recall(profile=profile, query="orange cat", now=NOW).fragments
    assert [m.mid for m in got] == ["c_0000000000000002", "c_0000000000000001"]


def test_highlights_and_experiences_r3():
    profile = ProfileFactory()
    line = say(profile, 1, "Mochi the cat loves tuna", NOW - timedelta(days=9))
    for i in range(5):
        HighlightFactory(message=line, content="Mochi the cat", hid=f"h_{i}")
    HighlightFactory(message=line, content="Mochi the cat loves tuna", hid="h_flagged", flagged="broken ref")
    for i in range(5):
        ExperienceFactory(profile=profile, title=f"cat Mochi {i}", content="tuna", status="active")
        ExperienceFactory(profile=profile, title=f"cat Mochi maybe {i}", content="tuna", status="candidate")
    ExperienceFactory(profile=profile, title="cat Mochi rejected", content="tuna", status="rejected")
    ExperienceFactory(profile=profile, title="cat Mochi invalid", content="tuna", status="active", invalid_at=NOW)
    got = recall(profile=profile, query="How is Mochi the cat?", now=NOW)
    assert len(got.highlights) == 3 and all(h.flagged == "" for h in got.highlights)
    assert len(got.active) == 3 and {e.status for e in got.active} == {"active"}
    assert len(got.candidates) == 2 and {e.status for e in got.candidates} == {"candidate"}
    assert not any("rejected" in e.title or "invalid" in e.title for e in got.active + got.candidates)


def test_the_curated_lookup_matches_the_querysets_it_stands_for_r3():
    """recall reads highlights and experiences in plain SQL (Highlight.objects.recall_pool); it must
    keep exactly usable()/valid()."""
    profile = ProfileFactory()
    other = ProfileFactory(user=profile.user, key="other")
    line = say(profile, 1, "Mochi the cat", NOW - timedelta(days=3))
    gone = say(profile, 2, "a hidden line", NOW - timedelta(days=2))
    for i in range(3):
        HighlightFactory(message=line, content=f"kept {i}", created_at=NOW - timedelta(hours=i))
    HighlightFactory(message=line, content="deleted", deleted_at=NOW)
    HighlightFactory(message=line, content="flagged", flagged="broken ref")
    HighlightFactory(message=gone, content="of a hidden line")
    HighlightFactory(message=say(other, 3, "elsewhere", NOW), content="another profile's")
    Message.objects.filter(pk=gone.pk).update(deleted_at=NOW)
    for status in ("active", "candidate", "rejected"):
        ExperienceFactory(profile=profile, title=status, status=status)
    ExperienceFactory(profile=profile, title="invalid", status="active", invalid_at=NOW)
    ExperienceFactory(profile=profile, title="deleted", status="active", deleted_at=NOW)
    ExperienceFactory(profile=profile, title="flagged", status="candidate", flagged="broken")
    ExperienceFactory(profile=other, title="another profile's", status="active")

    highlights, experiences = Highlight.objects.recall_pool(profile.pk, limit=CURATED_SCAN_LIMIT)
    expected_h = Highlight.objects.for_profile(profile).usable().order_by("-created_at")
    expected_e = Experience.objects.for_profile(profile).valid().filter(status__in=["active", "candidate"])
    assert [(h.pk, h.mid, h.content) for h in highlights] == [(h.pk, h.mid, h.content) for h in expected_h]
    assert [h.content for h in highlights] == ["kept 0", "kept 1", "kept 2"]
    assert sorted((e.pk, e.eid, e.title, e.content, e.status) for e in experiences) == sorted(
        (e.pk, e.eid, e.title, e.content, e.status) for e in expected_e
    )
    assert {e.title for e in experiences} == {"active", "candidate"}


def test_everything_is_cut_by_the_token_budget_r4():
    profile = ProfileFactory()
    for i in range(30):
        say(profile, i + 1, f"hiking trip number {i} " + "很长的故事" * 40, NOW - timedelta(days=i + 1))
    small = recall(profile=profile, query="hiking trip", now=NOW, budget=300)
    large = recall(profile=profile, query="hiking trip", now=NOW, budget=3000)
    assert 0 < len(small.fragments) < len(large.fragments)
    assert small.tokens <= 300 and large.tokens <= 3000


def test_the_budget_setting_is_the_default(settings):
    profile = ProfileFactory()
    say(profile, 1, "hiking " + "x" * 4000, NOW - timedelta(days=1))
    settings.PREVIOUSLY_CONTEXT_TOKENS = 100
    assert recall(profile=profile, query="hiking", now=NOW).fragments == []


def test_token_approximation_counts_cjk_characters_and_bytes():
    assert approx_tokens("你好世界") == 4
    assert approx_tokens("abcdefgh") == 2
    assert approx_tokens("你好 abcd") == 2 + 2


def test_cjk_punctuation_counts_as_a_token_like_the_characters_it_stands_between():
    """R4, U4: "，。（）：" are a token each in common vocabularies, not 3 bytes / 4 (issue 26:
    measured against SmolLM2's tokenizer, the Chinese system prompt's punctuation was most of
    what the count missed after the characters themselves)."""
    assert approx_tokens("，" * 12) == 12  # was 36 bytes / 4 = 9
    assert approx_tokens("好，" * 6 + "（无）：") == 16  # was 7 + 27 bytes / 4 = 14
    assert approx_tokens("ＡＢＣＤ") == 4  # fullwidth forms: was 12 bytes / 4 = 3
