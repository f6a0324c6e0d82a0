"""Issue 18 point 2 (SPEC R8): the backfill runs by itself. Lines that came without a vector (an
import, a change of model or of what a vector holds) get theirs from the server's housekeeping
pass, a bounded number each time, and lines without one are still found lexically meanwhile."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from memory.archive import archive_message
from memory.models import RecallVector
from memory.recall import embedding, vectors
from memory.recall.rank import rank_messages
from previously.housekeeping import run_idle_check
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db

START = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
LINES = [
    "My cat Niangao hid under the sofa all afternoon.",
    "年糕今天有点不舒服，我们去看了兽医。",
    "The vet said it was only a cold 🐱",
    "明天还要去复查一次。",
    "I bought her a new blanket, the blue one.",
]


def _archive(profile) -> list:
    return [
        archive_message(profile=profile, mid=f"h_{n:016x}", speaker="user", content=text,
                        created_at=START + timedelta(minutes=n)).message
        for n, text in enumerate(LINES)
    ]


def _tag() -> str:
    return vectors.model_tag(embedding.current())


@override_settings(PREVIOUSLY_EMBED_BACKFILL_LINES=2)
def test_each_pass_embeds_a_bounded_number_of_lines_until_none_is_missing():
    profile = ProfileFactory()
    lines = _archive(profile)
    vectors.remove([m.pk for m in lines])  # as after an import: indexed, not yet embedded
    assert vectors.behind()
    # Meanwhile the lines are found lexically.
    assert [h.message_id for h in rank_messages(profile_id=profile.pk, query="blanket", limit=1)] == [lines[4].pk]

    counts = []
    for _ in range(4):
        run_idle_check()
        counts.append(RecallVector.objects.filter(profile=profile, model=_tag()).count())
    assert counts == [2, 4, 5, 5]
    assert not vectors.behind()
    near = vectors.nearest(profile_id=profile.pk, query=embedding.embed(["sick cat at the vet"])[0], model=_tag(), limit=5)
    assert {mid for mid, _ in near} == {m.pk for m in lines}


def test_vectors_of_an_older_context_are_replaced_by_the_pass():
    profile = ProfileFactory()
    lines = _archive(profile)
    RecallVector.objects.filter(profile=profile).update(model=embedding.current().name)  # made without context
    assert vectors.behind()
    run_idle_check()
    assert set(RecallVector.objects.filter(profile=profile).values_list("model", flat=True)) == {_tag()}
    assert RecallVector.objects.filter(profile=profile).count() == len(lines)
    assert not vectors.behind()


@pytest.mark.parametrize("setting", [{"PREVIOUSLY_EMBEDDINGS": "off"}, {"PREVIOUSLY_EMBED_BACKFILL_LINES": 0}])
def test_with_embeddings_off_or_the_pass_turned_off_nothing_is_embedded(setting):
    profile = ProfileFactory()
    lines = _archive(profile)
    vectors.remove([m.pk for m in lines])
    with override_settings(**setting):
        run_idle_check()
    assert not RecallVector.objects.filter(profile=profile).exists()
