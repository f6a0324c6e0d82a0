"""The OpenAI-compatible /embeddings provider for hybrid recall (SPEC R8), against a real
local HTTP server."""

import pytest

from memory.archive import archive_message
from memory.models import RecallVector
from memory.recall import embedding
from memory.recall.rank import nearest_by_meaning, rank_messages
from previously.llm.base import ProviderError
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def remote(llm_server, settings):
    settings.PREVIOUSLY_EMBEDDINGS = "openai"
    settings.PREVIOUSLY_EMBEDDING_BASE_URL = llm_server.base_url
    settings.PREVIOUSLY_EMBEDDING_MODEL = "fake-embed"
    embedding.forget_remote()
    yield llm_server
    embedding.forget_remote()


def test_lines_are_embedded_by_the_endpoint_and_found_by_it(remote):
    profile = ProfileFactory()
    line = archive_message(profile=profile, mid="c_0000000000000001", speaker="user", content="tulips bloom").message
    archive_message(profile=profile, mid="c_0000000000000002", speaker="user", content="invoice overdue")
    row = RecallVector.objects.get(message=line)
    assert row.model == "openai:fake-embed+prev1"  # the model, and that the previous line is in the vector
    assert len(bytes(row.vector)) == 8 * 2
    assert any(r.get("model") == "fake-embed" and r.get("input") == ["tulips bloom"] for r in remote.requests)
    assert nearest_by_meaning(profile.pk, "tulips", 1)[0][0] == line.pk


def test_without_a_model_name_the_openai_choice_is_lexical_only(settings, llm_server):
    settings.PREVIOUSLY_EMBEDDINGS = "openai"
    settings.PREVIOUSLY_EMBEDDING_BASE_URL = llm_server.base_url
    settings.PREVIOUSLY_EMBEDDING_MODEL = ""
    embedding.forget_remote()
    assert embedding.current() is None
    embedding.forget_remote()


def test_an_endpoint_failure_is_a_provider_error_naming_it(remote):
    remote.stop()
    with pytest.raises(ProviderError, match="embeddings endpoint"):
        embedding.current().embed(["hello"])


def test_a_line_is_archived_and_found_lexically_even_when_the_endpoint_is_down(remote):
    remote.stop()
    profile = ProfileFactory()
    line = archive_message(profile=profile, mid="c_0000000000000003", speaker="user", content="tulips again").message
    assert not RecallVector.objects.filter(message=line).exists()
    assert line.pk in [h.message_id for h in rank_messages(profile_id=profile.pk, query="tulips", limit=5)]
