"""The index's side data (positions, slices, speakers, df and collection stats) follows every write."""

import pytest
from django.db import connection

from memory.archive import archive_message
from memory.models import RecallDocument, RecallStats, RecallTerm
from memory.recall import index
from memory.recall.index import index_messages, optimize_index, remove_messages, search
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db


def _say(profile, n, text, speaker="user"):
    return archive_message(profile=profile, mid=f"c_{n:016x}", speaker=speaker, content=text).message


def _df(profile, term):
    row = RecallTerm.objects.filter(profile=profile, term=term).first()
    return row.df if row else 0


def test_positions_follow_archive_order_per_profile():
    profile, other = ProfileFactory(), ProfileFactory()
    first = _say(profile, 1, "one")
    _say(other, 2, "elsewhere")
    second = _say(profile, 3, "two")
    docs = RecallDocument.objects.filter(profile=profile).order_by("pos")
    assert [(d.message_id, d.pos) for d in docs] == [(first.pk, 0), (second.pk, 1)]


def test_the_document_keeps_slice_speaker_and_local_day():
    profile = ProfileFactory()
    message = _say(profile, 1, "hello there", speaker="assistant")
    doc = RecallDocument.objects.get(message=message)
    assert (doc.slice_id, doc.speaker, doc.day) == (message.slice_id, "assistant", message.local_day_key)


def test_document_frequencies_count_messages_not_occurrences():
    profile = ProfileFactory()
    _say(profile, 1, "cake cake cake")
    _say(profile, 2, "cake and tea")
    assert (_df(profile, "cake"), _df(profile, "tea")) == (2, 1)


def test_collection_stats_count_documents_and_tokens():
    profile = ProfileFactory()
    _say(profile, 1, "cake cake cake")
    _say(profile, 2, "cake and tea")
    stats = RecallStats.objects.get(profile=profile)
    assert (stats.n_docs, stats.n_tokens, stats.next_pos) == (2, 5, 2)


def test_removing_a_message_decrements_df_and_stats():
    profile = ProfileFactory()
    gone = _say(profile, 1, "cake and tea")
    _say(profile, 2, "cake")
    remove_messages([gone.pk])
    stats = RecallStats.objects.get(profile=profile)
    assert (_df(profile, "cake"), stats.n_docs, stats.n_tokens) == (1, 1, 1)


def test_a_term_whose_last_message_is_removed_disappears():
    profile = ProfileFactory()
    gone = _say(profile, 1, "pineapple")
    remove_messages([gone.pk])
    assert not RecallTerm.objects.filter(profile=profile, term="pineappl").exists()


def test_reindexing_keeps_position_and_does_not_double_count():
    profile = ProfileFactory()
    message = _say(profile, 1, "cake")
    _say(profile, 2, "tea")
    index_messages([message])
    assert RecallDocument.objects.get(message=message).pos == 0
    assert (_df(profile, "cake"), RecallStats.objects.get(profile=profile).n_docs) == (1, 2)


def test_stats_are_per_profile():
    mine, theirs = ProfileFactory(), ProfileFactory()
    _say(mine, 1, "cake")
    _say(theirs, 2, "cake cake")
    assert (_df(mine, "cake"), _df(theirs, "cake")) == (1, 1)
    assert RecallStats.objects.get(profile=theirs).n_tokens == 2


def test_optimizing_the_index_keeps_every_message_findable():
    profile = ProfileFactory()
    message = _say(profile, 1, "团圆饭 reunion dinner")
    optimize_index()
    assert [h.message_id for h in search(profile_id=profile.pk, tokens=["reunion"], limit=5)] == [message.pk]


@pytest.mark.django_db(transaction=True)
def test_the_merge_after_a_bulk_load_runs_in_short_writes_until_one_segment_is_left(monkeypatch):
    """S4, BENCH §5: the import's closing merge of the full-text index is made of short writes,
    each its own transaction with the import's pause between them, not one 'optimize' that held
    the write lock for the whole index; what it leaves finds every line, and a second merge
    finds nothing left to do."""
    if connection.vendor != "sqlite":
        pytest.skip("the full-text segments are SQLite's (PostgreSQL runs ANALYZE)")
    profile = ProfileFactory()
    words = "apple banana cherry 苹果 香蕉 樱桃 date elder fig grape 葡萄 kiwi lemon mango".split()
    said = [_say(profile, n, f"{words[n % len(words)]} {words[(n * 7) % len(words)]} line{n} 第{n}句") for n in range(300)]
    steps, again = [], []
    monkeypatch.setattr(index, "MERGE_PAGES", 1)  # a step per leaf page: 300 one-line segments take many
    optimize_index(between=lambda: steps.append(connection.in_atomic_block))
    optimize_index(between=lambda: again.append(1))
    assert len(steps) > 1 and not any(steps)  # several writes, each committed before the pause
    assert again == []
    found = {h.message_id for h in search(profile_id=profile.pk, tokens=["line17"], limit=5)}
    assert found == {said[17].pk}
    cherries = sum("樱桃" in m.content for m in said)
    assert cherries and len(search(profile_id=profile.pk, tokens=["樱桃"], limit=500)) == cherries
