"""`make bench`'s recall on an archive that repeats itself (issue 24 point 10, BENCH §2): the
archive is a conversation set's turns over and over, each repeat with a short suffix, its
questions ranked through retrieve_batch's rank_queries; the summary states the goal."""

import pytest

from bench import recall_repeat
from memory.models import Message

pytestmark = pytest.mark.django_db(transaction=True)

DATA = {"format": "locomo-recall-v1", "conversations": [{
    "id": "c1", "speaker_a": "Ann", "speaker_b": "Bo",
    "docs": [{"id": f"D1:{i}", "text": f"{'Ann' if i % 2 else 'Bo'}: line {i} about tea and the cat",
              "speaker": "Ann" if i % 2 else "Bo", "session": 1 + i // 10} for i in range(30)],
    "queries": [{"qid": "c1:0", "question": "What did Ann say about tea?"},
                {"qid": "c1:1", "question": "When did Bo mention the cat?"}],
}]}


def test_the_archive_repeats_the_set_with_a_suffix_and_the_summary_states_the_goal():
    out = recall_repeat.run(data=DATA, sizes=[40, 100], n_questions=2, rounds=1)
    texts = list(Message.objects.order_by("created_at", "id").values_list("content", flat=True))
    assert len(texts) == 100
    assert texts[0] == "line 0 about tea and the cat" and texts[30] == "line 0 about tea and the cat ·2"
    assert len(set(texts)) == 100  # every repeat differs by its suffix
    assert out["sizes"]["100"]["recurrence"] == 3.3 and out["sizes"]["100"]["questions"] == 2
    text = recall_repeat.summary({**out, "sizes": {"10000": out["sizes"]["40"], "100000": out["sizes"]["100"]},
                                  "ratio_100k_10k": 1.2})
    assert "goal ≤ 1.5" in text and "goal ≤ 15 ms" in text
