"""Issue 24 point 11 (BENCH §4): the first turns after a server start no longer wait ~2 s for
the sentence-embedding model. The server process loads it before it listens; nothing loads it
when a test (or a management command) imports the application."""

from daphne.server import Server

from memory.recall import embedding
from previously import housekeeping, server


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
    bounded = server.BoundedServer(application=App(), endpoints=["tcp:port=0:interface=127.0.0.1"])
    bounded.run()
    assert seen.calls == ["warm up", "listen"]


def test_the_asgi_application_warm_up_loads_the_embedding_model(monkeypatch):
    seen = Recorder()
    monkeypatch.setattr(embedding, "preload", lambda: seen.calls.append("preload") or True)
    housekeeping.StartsHousekeeping(app=None).warm_up()
    assert seen.calls == ["preload"]


def test_the_warm_up_compiles_the_chat_and_evolution_templates(monkeypatch):
    seen = Recorder()
    monkeypatch.setattr(embedding, "preload", lambda: False)
    monkeypatch.setattr(housekeeping, "get_template", lambda name: seen.calls.append(name))
    housekeeping.warm_up()
    assert seen.calls == ["chat/chat.html", "card/evolution.html"]
