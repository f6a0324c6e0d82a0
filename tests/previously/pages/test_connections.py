"""SPEC O4: model connections managed in the browser by staff; the key sealed at rest and never
shown again; a test button; the chosen defaults reach every process without a restart."""

import logging
import socket

import pytest
from django.contrib.auth import get_user_model

from memory.models import Connection, ModelChoice
from previously.llm import get_provider, reset_provider
from tests import factories as f
from tests.csp import assert_csp_clean

KEY = "sk-live-SECRET-7f3a9c"
pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_user(username="root", password="pw-root-123", is_staff=True)
    f.ProfileFactory(user=user, key="owner")
    client.force_login(user)
    return user


@pytest.fixture
def fresh_choice(settings):
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS = 0
    reset_provider(None)
    yield
    reset_provider(None)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_only_http_and_https_addresses_are_taken(staff, client):
    page = client.post("/connections/new/", {"base_url": "ftp://127.0.0.1/v1", "api_key": KEY})
    assert page.status_code == 400 and "http:// or https://" in page.content.decode()
    assert client.post("/connections/new/", {"base_url": "javascript:alert(1)"}).status_code == 400
    assert not Connection.objects.exists()


def test_the_key_is_sealed_and_never_shown_again_nor_logged(staff, client, caplog, llm_server):
    caplog.set_level(logging.DEBUG)
    client.post("/connections/new/", {"name": "本地 llama", "base_url": llm_server.base_url, "api_key": KEY})
    conn = Connection.objects.get()
    assert conn.sealed_key and KEY not in conn.sealed_key
    for path in ("/connections/", f"/connections/{conn.pk}/", f"/connections/{conn.pk}/models/", "/about/"):
        response = client.get(path)
        assert KEY not in response.content.decode(), path
    assert_csp_clean(client.get("/connections/"))
    client.post(f"/connections/{conn.pk}/", {"name": "renamed", "base_url": llm_server.base_url, "api_key": ""})
    assert Connection.objects.get().name == "renamed" and Connection.objects.get().sealed_key == conn.sealed_key
    client.post(f"/connections/{conn.pk}/test/")
    export = client.get("/data/export/")
    body = b"".join(export.streaming_content) if getattr(export, "streaming", False) else export.content
    assert KEY.encode() not in body
    assert KEY not in caplog.text


def test_the_test_button_shows_the_latency_or_the_error_in_plain_words(staff, client, llm_server):
    good = Connection.objects.create(name="local", base_url=llm_server.base_url)
    dead = Connection.objects.create(name="gone", base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    client.post(f"/connections/{good.pk}/test/")
    assert "answered in" in client.get("/connections/").content.decode()
    client.post(f"/connections/{dead.pk}/test/")
    assert "could not be reached" in client.get("/connections/").content.decode()
    models = client.get(f"/connections/{good.pk}/models/").content.decode()
    assert "fake-model" in models


def test_the_chosen_connection_is_used_without_a_restart_and_a_change_elsewhere_is_followed(
        staff, client, llm_server, fresh_choice):
    assert get_provider().offline
    conn = Connection.objects.create(name="local", base_url=llm_server.base_url)
    client.post("/connections/choose/", {"chat_connection": conn.pk, "chat_model": "fake-model",
                                         "agent_model": "fake-agent"})
    provider = get_provider()
    assert not provider.offline and provider.base_url == llm_server.base_url.rstrip("/")
    assert provider.model == "fake-model"
    # Another process changes the connection: the row and the version, as its view does.
    Connection.objects.filter(pk=conn.pk).update(base_url="http://127.0.0.1:9/v1")
    ModelChoice.bump()
    assert get_provider().base_url == "http://127.0.0.1:9/v1"


def test_the_environment_wins_and_the_page_says_so(staff, client, settings, fresh_choice, llm_server):
    settings.PREVIOUSLY_LLM_BASE_URL = llm_server.base_url
    conn = Connection.objects.create(name="other", base_url="http://127.0.0.1:9/v1")
    client.post("/connections/choose/", {"chat_connection": conn.pk, "chat_model": "x"})
    assert get_provider().base_url == llm_server.base_url.rstrip("/")
    assert "PREVIOUSLY_LLM_BASE_URL" in client.get("/connections/").content.decode()


def test_only_staff_manage_connections(client):
    user = get_user_model().objects.create_user(username="dora", password="pw-dora-123")
    f.ProfileFactory(user=user, key="owner")
    client.force_login(user)
    assert client.get("/connections/").status_code == 403
    assert client.post("/connections/new/", {"base_url": "http://127.0.0.1:1/v1"}).status_code == 403
    assert not Connection.objects.exists()


def test_offline_the_chat_page_tells_staff_where_to_connect_and_others_who_can(staff, client, settings, fresh_choice):
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    assert "/connections/" in client.get("/").content.decode()
    other = get_user_model().objects.create_user(username="eve", password="pw-eve-1234")
    f.ProfileFactory(user=other, key="owner", language="en")
    client.force_login(other)
    page = client.get("/").content.decode()
    assert "/connections/" not in page and "can connect one" in page
