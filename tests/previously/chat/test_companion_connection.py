"""Issue 28 point 1 (O4) over the socket: a companion whose model was picked from another
connection's list is answered by that connection; embeddings chosen on the connections page
whose server is unreachable leave recall lexical with a warning and never fail a turn."""

import logging
import socket

import pytest
from channels.db import database_sync_to_async

from memory.models import Connection, Message, ModelChoice, Profile, RecallVector
from memory.recall import embedding
from previously.llm import reset_provider
from tests.llm_server import FakeLLMServer, Turn
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def unpinned(settings):
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    settings.PREVIOUSLY_EMBEDDINGS = ""
    settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS = 0
    reset_provider(None)
    yield
    reset_provider(None)


@database_sync_to_async
def store(**fields):
    return ModelChoice.objects.update_or_create(pk=1, defaults=fields)[0]


@database_sync_to_async
def connection(name, base_url):
    return Connection.objects.create(name=name, base_url=base_url)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_companion_is_answered_by_the_connection_its_model_came_from(connect, user, profile, llm_server, unpinned):
    other = FakeLLMServer(models=["深度-r1"]).start()
    try:
        home = await connection("home", llm_server.base_url)
        away = await connection("away ☁️", other.base_url)
        await store(chat_connection=home, chat_model="fake-model", agent_model="fake-agent")
        chat = await connect(user)
        llm_server.script(Turn(chunks=["from home"]))
        await chat.say("第一句", mid=new_mid(1))
        assert llm_server.requests[-1]["model"] == "fake-model"

        # Picked on the settings page meanwhile (as its form saves it).
        await database_sync_to_async(Profile.objects.filter(pk=profile.pk).update)(model="深度-r1", model_connection=away)
        other.script(Turn(chunks=["from away 🌙"]))
        frames = await chat.say("second line", mid=new_mid(2))
        assert other.requests[-1]["model"] == "深度-r1" and other.requests[-1]["stream"] is True
        assert any("from away" in f for f in frames)
        assert len(llm_server.requests) == 1
    finally:
        other.stop()


async def test_an_unreachable_embedding_connection_never_fails_a_turn(connect, user, profile, llm_server, unpinned, caplog):
    chat_conn = await connection("chat", llm_server.base_url)
    dead = await connection("embeddings gone", f"http://127.0.0.1:{_closed_port()}/v1")
    await store(chat_connection=chat_conn, chat_model="fake-model", embeddings="openai",
                embedding_connection=dead, embedding_model="nomic-embed-text")
    embedding.forget_remote()
    chat = await connect(user)
    llm_server.script(Turn(chunks=["still ", "here"]))
    with caplog.at_level(logging.WARNING):
        frames = await chat.say("你还记得郁金香吗 🌷", mid=new_mid(3))
    assert any("still" in f for f in frames)
    lines = await database_sync_to_async(lambda: list(Message.objects.filter(profile=profile).values_list("content", "id")))()
    assert [c for c, _ in lines] == ["你还记得郁金香吗 🌷", "still here"]
    assert not await database_sync_to_async(RecallVector.objects.filter(profile=profile).exists)()
    assert "embedding" in caplog.text and ("lexical" in caplog.text or "embed_backfill will retry" in caplog.text)
