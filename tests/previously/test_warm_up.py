"""Issue 24 point 11 (BENCH §4): the first turns after a server start no longer wait ~2 s for
the sentence-embedding model, nor for the model server's context window. The server process
loads and asks before (or while) it listens; nothing does when a test (or a management
command) imports the application."""

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from daphne.server import Server
from django.conf import settings

from memory.recall import embedding
from previously import housekeeping, server
from previously.llm import reset_provider, select
from previously.llm.openai_compat import OpenAICompatible


class Recorder:
    def __init__(self):
        self.calls = []


def test_preload_loads_the_local_model_once_and_nothing_else(monkeypatch, settings):
    fresh = embedding.LocalUSE()
    monkeypatch.setattr(embedding, "_LOCAL", fresh)
    settings.PREVIOUSLY_EMBEDDINGS = "local"
    assert not fresh.loaded
    assert embedding.preload() is True
    assert fresh.loaded
    assert embedding.preload() is False  # already there
    settings.PREVIOUSLY_EMBEDDINGS = "off"
    other = embedding.LocalUSE()
    monkeypatch.setattr(embedding, "_LOCAL", other)
    assert embedding.preload() is False and not other.loaded


def test_the_server_warms_the_application_up_before_it_listens(monkeypatch):
    seen = Recorder()

    class App:
        async def __call__(self, scope, receive, send):  # pragma: no cover - never served here
            pass

        def warm_up(self):
            seen.calls.append("warm up")

    monkeypatch.setattr(Server, "run", lambda self: seen.calls.append("listen"))
    monkeypatch.setattr(server.gc, "freeze", lambda: seen.calls.append("freeze"))
    bounded = server.BoundedServer(application=App(), endpoints=["tcp:port=0:interface=127.0.0.1"])
    bounded.run()
    # What the warm-up loaded is frozen with the rest, out of the collector's full passes (BENCH §4).
    assert seen.calls == ["warm up", "freeze", "listen"]


def test_the_asgi_application_warm_up_loads_the_embedding_model(monkeypatch):
    seen = Recorder()
    monkeypatch.setattr(embedding, "preload", lambda: seen.calls.append("preload") or True)
    monkeypatch.setattr(housekeeping, "context_tokens", lambda: None)
    housekeeping.StartsHousekeeping(app=None).warm_up().join(10)
    assert seen.calls == ["preload"]


# A fresh interpreter: which modules the application's import leaves to the first reply, and
# which of them the warm-up loads. No embedding model, no model server (the window's ask fails
# in its thread, which the start never waits for).
LAZY = """
import json, sys
import django
django.setup()
from previously import asgi, housekeeping
names = [*housekeeping.WARM_MODULES, "previously.pages.chat.views"]  # the last: the URLconf's
before = [n for n in names if n in sys.modules]
housekeeping.warm_up()
print(json.dumps({"before": before, "after": [n for n in names if n in sys.modules]}))
"""


def _fresh_process_env(tmp_path) -> dict:
    """A new interpreter's environment: the product's settings, no embedding model, a model
    server address nothing answers at (the test starts its own where it needs one)."""
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "previously.settings", "PREVIOUSLY_EMBEDDINGS": "off",
            "PREVIOUSLY_LLM_BASE_URL": "http://127.0.0.1:9/v1", "PREVIOUSLY_VAR_DIR": str(tmp_path)}


def test_the_warm_up_loads_what_the_first_reply_and_the_first_request_would_import(tmp_path):
    """anyio loads its asyncio backend on the first connection, Django the URLconf with every
    page's views on the first request: each import ran on the event loop while every socket
    waited (issue 24 point 11). A name an upgrade moves fails here, not silently at the first
    reply; test_the_first_reply_after_the_warm_up_imports_nothing covers what it leaves out."""
    done = subprocess.run([sys.executable, "-c", LAZY], env=_fresh_process_env(tmp_path), cwd=settings.BASE_DIR, capture_output=True,
                          text=True, timeout=120, check=True)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["before"] == []  # the application's import leaves them to first use
    assert loaded["after"] == [*housekeeping.WARM_MODULES, "previously.pages.chat.views"]


FIRST_REPLY = """
import asyncio, json, sys
import django
django.setup()
from previously import asgi, housekeeping
from previously.llm.openai_compat import OpenAICompatible
from tests.llm_server import FakeLLMServer, Turn
model = FakeLLMServer().start()
model.script(Turn(chunks=["你好", " 🐱"]))
housekeeping.warm_up().join(10)
provider = OpenAICompatible(base_url=model.base_url, api_key="", model="m")
before = set(sys.modules)
async def reply():
    return [chunk async for chunk in provider.astream([{"role": "user", "content": "hi"}])]
chunks = asyncio.run(reply())
print(json.dumps({"chunks": chunks, "imported": sorted(set(sys.modules) - before)}))
"""


def test_the_first_reply_after_the_warm_up_imports_nothing(tmp_path):
    """Issue 24 point 11: a whole streamed reply after the warm-up, through the SDK to a local
    model server, imports no module on the event loop (without WARM_MODULES, anyio's asyncio
    backend came in with it; the SDK's chat resources no longer do, see openai_compat)."""
    done = subprocess.run([sys.executable, "-c", FIRST_REPLY], env=_fresh_process_env(tmp_path), cwd=settings.BASE_DIR, capture_output=True,
                          text=True, timeout=120, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["chunks"] == ["你好", " 🐱"]
    assert seen["imported"] == []


def test_the_warm_up_compiles_the_chat_and_evolution_templates(monkeypatch):
    seen = Recorder()
    monkeypatch.setattr(embedding, "preload", lambda: False)
    monkeypatch.setattr(housekeeping, "context_tokens", lambda: None)
    monkeypatch.setattr(housekeeping, "get_template", lambda name: seen.calls.append(name))
    housekeeping.warm_up().join(10)
    assert seen.calls == ["chat/chat.html", "card/evolution.html"]


class WindowServer:
    """A model server on loopback that reports its context window at GET /props, counting the
    requests; `hold` keeps each answer back until released."""

    def __init__(self, *, hold: bool = False):
        self.asked = []
        self.first = threading.Event()
        self.second = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.asked.append(self.path)
                (outer.second if outer.first.is_set() else outer.first).set()
                outer.release.wait(10)
                body = json.dumps({"default_generation_settings": {"n_ctx": 4096}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def window_server(settings):
    settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS = 0
    made = []

    def start(**kwargs):
        made.append(WindowServer(**kwargs))
        reset_provider(OpenAICompatible(base_url=made[-1].base_url, api_key="", model="m"))
        return made[-1]

    yield start
    reset_provider(None)
    for s in made:
        s.stop()


def test_the_warm_up_asks_the_model_server_for_its_window_so_the_first_turn_does_not(monkeypatch, window_server):
    """Issue 24 point 11: the first turns after a start each asked the model server for its
    context window on their own (1.1–1.3 s at BENCH §4's loadtest, whose server answers
    slowly); the server's warm-up asks once, and a turn then finds the answer."""
    model_server = window_server()
    monkeypatch.setattr(embedding, "preload", lambda: False)
    housekeeping.warm_up()
    assert model_server.first.wait(10), "the warm-up did not ask the model server"
    assert select.context_tokens() == 4096
    assert model_server.asked == ["/props"]


def test_turns_that_arrive_while_the_window_is_asked_wait_for_that_answer(window_server):
    """Issue 24 point 11: while the context window is being asked (the warm-up, or the first
    turn), the next turns wait for that answer instead of asking again."""
    model_server = window_server(hold=True)
    answers = []
    first = threading.Thread(target=lambda: answers.append(select.context_tokens()))
    first.start()
    assert model_server.first.wait(10)
    second = threading.Thread(target=lambda: answers.append(select.context_tokens()))
    second.start()
    asked_again = model_server.second.wait(1.0)  # a bounded look for a second request
    model_server.release.set()
    first.join(10)
    second.join(10)
    assert not asked_again and model_server.asked == ["/props"]
    assert answers == [4096, 4096]


def test_a_turn_reads_a_window_already_asked_without_leaving_the_event_loop(window_server, settings):
    """Issue 24 point 11: once the window is known (asked, set, or offline) a turn reads it
    as it is (`known_context_tokens`), not through a thread of its own on every turn."""
    window_server()
    assert select.known_context_tokens() == (False, None)
    assert select.context_tokens() == 4096
    assert select.known_context_tokens() == (True, 4096)
    settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS = 8192
    assert select.known_context_tokens() == (True, 8192)
