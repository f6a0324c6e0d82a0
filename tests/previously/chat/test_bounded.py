"""Per-turn database work is bounded (SPEC O2): the same number of queries at 100 and 10,000 lines."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.archive import archive_message
from memory.models import Message, Slice
from memory.recall.index import index_messages
from previously.chat.turn import prepare, store_reply
from tests.factories import ExperienceFactory, HighlightFactory, ProfileFactory

pytestmark = pytest.mark.django_db

WORDS = "cat tea rain work piano garden movie train sister coffee 猫咪 下雨 工作 电影 咖啡 周末 妹妹".split()
START = datetime(2024, 1, 1, tzinfo=UTC)


def build_archive(size: int):
    """`size` archived lines over many slices, bulk-written and indexed like the archive would."""
    profile = ProfileFactory(language="en")
    rng = random.Random(size)
    slices = Slice.objects.bulk_create(
        Slice(profile=profile, key=(START + timedelta(days=d)).strftime("%Y-%m-%d-%H%M"),
              started_at=START + timedelta(days=d), last_message_at=START + timedelta(days=d), ended_at=START + timedelta(days=d, hours=1),
              close_reason="gap")
        for d in range(max(1, size // 50))
    )
    messages = Message.objects.bulk_create(
        (
            Message(
                profile=profile, slice=slices[i // 50], mid=f"c_{i:016x}", speaker="user",
                # Every word is common; "aurora" is rare, as most words of a real question are
                # (recall leaves a term in more than RecallConfig.max_term_postings lines out).
                content=" ".join(rng.choice(WORDS) for _ in range(8)) + (" aurora" if i % 500 == 0 else ""),
                created_at=slices[i // 50].started_at + timedelta(seconds=i % 50), tz="UTC",
            )
            for i in range(size)
        ),
        batch_size=1000,
    )
    index_messages(messages)
    for m in messages[:5]:
        HighlightFactory(message=m, content=m.content[:8])
    ExperienceFactory(profile=profile, title="cat", content="has a cat", status="active")
    ExperienceFactory(profile=profile, title="tea", content="likes tea", status="candidate")
    return profile


def one_turn(profile, n):
    """All database work of a turn: archive the line, recall + prompt, archive the reply with a marker."""
    user = archive_message(profile=profile, mid=f"c_{0xFFFF0000 + n:016x}", speaker="user", content="the cat and the rain 猫咪 下雨 again, aurora").message
    prepared = prepare(profile, user)
    store_reply(profile, user, mid=f"a_{1800000000000 + n}_abc{n}", raw="ok [[fav:the cat]]", content="ok", favs=["the cat"], status="complete")
    return prepared


@pytest.mark.parametrize("size", [100, 10_000])
def test_a_turn_takes_a_small_fixed_number_of_queries_o2(size):
    profile = build_archive(size)
    one_turn(profile, 0)  # warm: opens the slice
    with CaptureQueriesContext(connection) as ctx:
        prepared = one_turn(profile, 1)
    assert prepared.recalled.fragments  # recall did work
    print("\n".join(q["sql"][:160] for q in ctx.captured_queries))
    # A fixed cap whatever the archive size (O2); raised from 40 to 44 this round for the tombstone
    # check on every archive write (D6), the one-turn-per-profile lease (S3) and the vector write (R8);
    # 45 for the previous line of the slice read with it (issue 18: a vector carries its context);
    # 46 on SQLite, where the full-text step reads the index's best matches, then this profile's
    # rows among them (another person's big archive must not crowd them out, S4); 48 and 47
    # since the reply, its link to the user line and the lease's release are one transaction
    # (one wait for SQLite's write lock, not two): the reply's archive write is now a savepoint.
    assert len(ctx.captured_queries) <= (48 if connection.vendor == "sqlite" else 47)


def test_the_same_query_count_at_both_sizes_o2(django_assert_max_num_queries):
    counts = []
    for size in (100, 10_000):
        profile = build_archive(size)
        one_turn(profile, 0)
        with CaptureQueriesContext(connection) as ctx:
            one_turn(profile, 1)
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1], counts
    with django_assert_max_num_queries(counts[0]):
        one_turn(profile, 2)
