"""rank_messages: the chat's recall over a profile's whole archive (SPEC R2, D3, P2, O2)."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from memory.archive import archive_message
from memory.models import Message
from memory.recall import rank
from memory.recall.index import Candidate, remove_messages
from memory.recall.rank import date_cues, rank_messages, select_match_terms
from memory.recall.tokenize import tokenize
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db

START = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _say(profile, n, text, speaker="user", at=None, new_conversation=False):
    return archive_message(
        profile=profile, mid=f"c_{n:016x}", speaker=speaker, content=text,
        created_at=at or START + timedelta(minutes=n), new_conversation=new_conversation,
    ).message


def _ids(profile, query, limit=10, **kwargs):
    return [h.message_id for h in rank_messages(profile_id=profile.pk, query=query, limit=limit, **kwargs)]


def test_the_most_relevant_message_comes_first():
    profile = ProfileFactory()
    _say(profile, 1, "cats are nice")
    best = _say(profile, 2, "my cat Mochi loves tuna, Mochi is a cat")
    _say(profile, 3, "dogs bark")
    assert _ids(profile, "What does Mochi eat?")[0] == best.pk


def test_chinese_questions_find_chinese_messages():
    profile = ProfileFactory()
    _say(profile, 1, "今天天气不错")
    answer = _say(profile, 2, "我下周三要交季度报告")
    assert _ids(profile, "季度报告什么时候交")[0] == answer.pk


def test_a_named_speaker_lines_are_preferred():
    profile = ProfileFactory()
    theirs = _say(profile, 1, "I went hiking in the mountains", speaker="assistant")
    mine = _say(profile, 2, "I went hiking in the mountains", speaker="user")
    names = {"Caroline": "user", "Melanie": "assistant"}
    assert _ids(profile, "Where did Melanie go hiking?", speaker_names=names)[0] == theirs.pk
    assert _ids(profile, "Where did Caroline go hiking?", speaker_names=names)[0] == mine.pk


def test_the_turn_after_a_hit_is_recalled_through_its_neighbour():
    profile = ProfileFactory()
    for n in range(1, 6):
        _say(profile, n, f"filler line number {n} about groceries")
    _say(profile, 10, "What did the vet say about Biscuit?", new_conversation=True)
    answer = _say(profile, 11, "Nothing serious, just needs rest")
    assert answer.pk in _ids(profile, "What did the vet say about Biscuit?", limit=3)


def test_neighbours_never_cross_a_slice():
    profile = ProfileFactory()
    _say(profile, 1, "What did the vet say about Biscuit?")
    other = _say(profile, 2, "Nothing serious, just needs rest", new_conversation=True)
    assert other.pk not in _ids(profile, "vet Biscuit")


def test_when_questions_prefer_turns_with_a_time_word():
    profile = ProfileFactory()
    plain = _say(profile, 1, "I adopted a puppy named Rex")
    timed = _say(profile, 2, "I adopted a puppy named Rex last week", new_conversation=True)
    ranked = _ids(profile, "When did I adopt Rex?")
    assert ranked.index(timed.pk) < ranked.index(plain.pk)


def test_a_named_month_prefers_turns_from_that_month():
    profile = ProfileFactory()
    may = _say(profile, 1, "we planted tomatoes", at=datetime(2023, 5, 10, 9, tzinfo=UTC))
    june = _say(profile, 2, "we planted tomatoes", at=datetime(2023, 6, 10, 9, tzinfo=UTC))
    ranked = _ids(profile, "What did we plant in May 2023?")
    assert ranked.index(may.pk) < ranked.index(june.pk)


def test_month_cues_ignore_may_the_verb():
    assert date_cues("May I ask what you planted?") == []


def test_an_old_relevant_message_is_found_among_many_newer_ones():
    profile = ProfileFactory()
    old = _say(profile, 1, "My grandmother's secret recipe uses cardamom", at=START)
    for n in range(2, 402):
        _say(profile, n, f"chatting about work and the weather, day {n}", at=START + timedelta(days=n))
    assert _ids(profile, "which spice is in grandmother's recipe?", limit=5)[0] == old.pk


def test_removed_messages_are_never_returned_d3():
    profile = ProfileFactory()
    gone = _say(profile, 1, "pineapples grow slowly")
    kept = _say(profile, 2, "pineapples are tasty")
    remove_messages([gone.pk])
    Message.objects.filter(pk=gone.pk).update(deleted_at=START)
    assert _ids(profile, "pineapples") == [kept.pk]


def test_a_soft_deleted_message_still_in_the_index_is_not_returned():
    profile = ProfileFactory()
    gone = _say(profile, 1, "pineapples grow slowly")
    Message.objects.filter(pk=gone.pk).update(deleted_at=START)
    assert _ids(profile, "pineapples") == []


def test_recall_never_crosses_profiles_p2():
    mine, theirs = ProfileFactory(), ProfileFactory()
    _say(theirs, 1, "secret plans for Friday")
    _say(mine, 2, "plans for the weekend")
    assert all(
        Message.objects.get(pk=i).profile_id == mine.pk for i in _ids(mine, "secret plans Friday")
    )


def test_unknown_words_recall_nothing():
    profile = ProfileFactory()
    _say(profile, 1, "hello there")
    assert _ids(profile, "zebra 🦓") == []


def _queries_per_recall(profile):
    with CaptureQueriesContext(connection) as ctx:
        rank_messages(profile_id=profile.pk, query="When did we talk about the garden and tomatoes?", limit=10)
    return len(ctx.captured_queries)


def test_queries_per_recall_do_not_grow_with_the_archive_o2():
    small, large = ProfileFactory(), ProfileFactory()
    lines = ["the garden needs water", "tomatoes are red", "we talked yesterday", "work was long"]
    for n in range(20):
        _say(small, n + 1, lines[n % 4])
    for n in range(400):
        _say(large, 1000 + n, lines[n % 4] + f" item {n}", at=START + timedelta(hours=n))
    # Hybrid recall (R8) adds at most four: the shortlist's freshness check and bits (SQLite
    # reads them once per process outside a transaction), the exact re-rank, and the index
    # rows of the nearest lines. On SQLite the full-text step is two: the index's best matches,
    # then this profile's rows among them (another person's lines may fill the first, S4).
    full_text = 2 if connection.vendor == "sqlite" else 1
    assert _queries_per_recall(small) <= 6 + full_text and _queries_per_recall(large) <= 6 + full_text
    with override_settings(PREVIOUSLY_EMBEDDINGS="off"):
        assert _queries_per_recall(small) == _queries_per_recall(large) == 2 + full_text


# --- issue 24 point 10 (BENCH §2): recall on an archive whose wording repeats ------------------


def test_a_term_in_too_many_lines_is_not_sent_to_the_full_text_query():
    """Its postings would all be scored for almost no evidence; rarer terms still go, and a
    question of common terms alone sends none (the nearest lines by meaning still come)."""
    df = {"tea": 40, "like": 9_000, "time": 25_000}
    assert select_match_terms(["like", "tea", "time"], df, budget=500, max_postings=2000) == ["tea"]
    assert select_match_terms(["like", "time"], df, budget=500, max_postings=2000) == []
    assert select_match_terms(["like", "time"], df, budget=500) == ["like"]  # no cap: the rarest always went


def test_a_question_of_only_too_common_terms_makes_no_full_text_query(monkeypatch):
    """A question whose only term is in more lines than the cap: no full-text query is made."""
    profile = ProfileFactory()
    for n in range(6):
        _say(profile, n, f"the weather is nice {n}")
    monkeypatch.setattr(rank, "DEFAULT_CONFIG", rank.RecallConfig(max_term_postings=5, dense_weight=0))
    sent = []
    real = rank.candidates
    monkeypatch.setattr(rank, "candidates", lambda pid, terms, *a: sent.append(list(terms)) or real(pid, terms, *a))
    assert rank_messages(profile_id=profile.pk, query="weather", limit=5, config=rank.DEFAULT_CONFIG) == []
    assert sent == [[]]


def test_the_time_boost_reads_a_line_terms_in_one_search_as_the_token_check_did():
    texts = ["I went there yesterday with my mom", "In 2022 we moved", "nothing here", "last week was fun",
             "我昨天去了公园", "year 1999 party", "12019 and 20201", "meet next Monday", "上个月", "May 7, 2023"]
    for text in texts:
        tokens = tokenize(text)
        by_token = bool(rank._TIME_TOKENS.intersection(tokens) or any(re.fullmatch(r"(19|20)\d\d", t) for t in tokens))
        assert rank.has_time_word(" ".join(tokens)) is by_token, text


def test_candidates_split_their_terms_only_when_read():
    candidate = Candidate(1, 1.0, 0, 1, "user", "2024-03-01", "went yesterday mom")
    assert "tokens" not in candidate.__dict__
    assert candidate.tokens == ["went", "yesterday", "mom"]


def test_sqlite_reads_through_a_memory_map():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA mmap_size")
        assert cursor.fetchone()[0] > 0
