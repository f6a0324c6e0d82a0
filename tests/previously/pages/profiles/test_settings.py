"""Issue 17 point 8: the companion settings page — validated, the model server's list offered
when it lists one, a typed name (with the environment's model named) when it does not."""

import pytest
from django.urls import reverse

from memory.models import Connection, ModelChoice, Profile
from previously.llm import reset_provider
from previously.llm.openai_compat import OpenAICompatible
from previously.llm.select import provider_for
from tests.csp import assert_csp_clean
from tests.llm_server import FakeLLMServer

pytestmark = pytest.mark.django_db

VALID = {
    "name": "小海 🌊", "persona": "You are Sea.", "language": "zh", "model": "", "temperature": "",
    "proactive_enabled": "on", "quiet_from": "", "quiet_until": "", "tz": "Asia/Shanghai",
}


@pytest.fixture
def listing_server():
    server = FakeLLMServer(models=["qwen2.5:7b", "llama3.1:8b"]).start()
    reset_provider(OpenAICompatible(base_url=server.base_url, api_key="", model="qwen2.5:7b"))
    yield server
    reset_provider(None)
    server.stop()


@pytest.fixture
def silent_server():
    server = FakeLLMServer(models=None).start()
    reset_provider(OpenAICompatible(base_url=server.base_url, api_key="", model="env-model"))
    yield server
    reset_provider(None)
    server.stop()


def url(profile):
    return reverse("profile_edit", args=[profile.key])


def test_the_model_servers_list_is_offered_and_a_choice_is_saved(logged_in, profile, listing_server):
    response = logged_in.get(url(profile))
    html = response.content.decode()
    assert response.status_code == 200
    assert '<select name="model"' in html
    assert '<option value="llama3.1:8b">llama3.1:8b</option>' in html
    assert "The server’s default (qwen2.5:7b)" in html  # the empty choice names the fallback
    assert_csp_clean(response)

    response = logged_in.post(url(profile), {**VALID, "model": "llama3.1:8b", "temperature": "0.4",
                                             "quiet_from": "22", "quiet_until": "8"})
    assert response.status_code == 302
    profile.refresh_from_db()
    assert (profile.name, profile.model, profile.temperature) == ("小海 🌊", "llama3.1:8b", 0.4)
    assert (profile.quiet_from, profile.quiet_until, profile.tz) == (22, 8, "Asia/Shanghai")
    assert profile.proactive_hours == "8-22"  # the hours it may write, as the setting spells them


def test_a_model_the_server_does_not_list_is_refused_from_the_list(logged_in, profile, listing_server):
    response = logged_in.post(url(profile), {**VALID, "model": "gpt-imaginary"})
    assert response.status_code == 400
    assert "gpt-imaginary" in response.content.decode()  # the error names the value
    assert Profile.objects.get(pk=profile.pk).model == ""


def test_without_a_list_a_name_is_typed_and_the_fallback_is_named(logged_in, profile, silent_server):
    html = logged_in.get(url(profile)).content.decode()
    assert '<input type="text" name="model"' in html
    assert "lists its models now" in html and "env-model" in html
    response = logged_in.post(url(profile), {**VALID, "model": "  my-local-model  "})
    assert response.status_code == 302
    assert Profile.objects.get(pk=profile.pk).model == "my-local-model"


def test_offline_the_page_says_the_model_waits_for_one(logged_in, profile):
    html = logged_in.get(url(profile)).content.decode()
    assert "take effect once one is" in html
    assert '<input type="text" name="model"' in html


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"temperature": "2.5"}, "temperature", "less than or equal to 2"),
        ({"temperature": "-1"}, "temperature", "greater than or equal to 0"),
        ({"temperature": "warm"}, "temperature", "Enter a number"),
        ({"tz": "Mars/Olympus_Mons"}, "tz", "“Mars/Olympus_Mons” is not a time zone"),
        ({"quiet_from": "22"}, None, "both a start and an end"),
        ({"quiet_from": "7", "quiet_until": "7"}, None, "cannot start and end at the same hour"),
        ({"quiet_from": "24", "quiet_until": "7"}, "quiet_from", "Select a valid choice"),
        ({"language": "fr"}, "language", "Select a valid choice"),
    ],
)
def test_bad_settings_are_refused_with_a_clear_error(logged_in, profile, change, field, message):
    response = logged_in.post(url(profile), {**VALID, **change})
    assert response.status_code == 400
    form = response.context["form"]
    errors = form.errors.get(field or "__all__", [])
    assert any(message in e for e in errors), form.errors
    fresh = Profile.objects.get(pk=profile.pk)
    assert (fresh.persona, fresh.tz, fresh.temperature) == (profile.persona, profile.tz, None)  # nothing saved


def test_someone_elses_companion_has_no_settings_page_for_you(logged_in, profile):
    other = Profile.objects.create(user=type(profile.user).objects.create(username="bob"), key="bobs")
    assert logged_in.get(url(other)).status_code == 404
    assert logged_in.post(url(other), {**VALID, "model": "stolen"}).status_code == 404
    assert Profile.objects.get(pk=other.pk).model == ""


def test_the_unnamed_default_companion_is_never_shown_by_its_key(logged_in, profile):
    Profile.objects.filter(pk=profile.pk).update(name="")
    html = logged_in.get(reverse("profiles"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Your companion" in html
    assert '<option value="owner" selected>owner</option>' not in html


# --- The companion picks its model from the connections' lists (issue 28 point 1, O4) ---


@pytest.fixture
def two_connections(settings):
    """Two stored connections with their own model lists, the first chosen for chat; the
    environment sets nothing, every process follows a change at once."""
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    settings.PREVIOUSLY_CONNECTION_CHECK_SECONDS = 0
    home = FakeLLMServer(models=["qwen2.5:7b"]).start()
    away = FakeLLMServer(models=["llama3.1:8b", "深度-r1"]).start()
    first = Connection.objects.create(name="家里 llama.cpp", base_url=home.base_url)
    second = Connection.objects.create(name="Hosted ☁️", base_url=away.base_url)
    ModelChoice.objects.create(pk=1, chat_connection=first, chat_model="qwen2.5:7b")
    reset_provider(None)
    yield first, second, home, away
    reset_provider(None)
    home.stop()
    away.stop()


def test_every_connections_models_are_offered_under_its_name_and_the_pick_keeps_its_connection(
        logged_in, profile, two_connections):
    first, second, home, away = two_connections
    html = logged_in.get(url(profile)).content.decode()
    assert '<optgroup label="家里 llama.cpp">' in html and '<optgroup label="Hosted ☁️">' in html
    assert f'<option value="{second.pk}|深度-r1">深度-r1</option>' in html
    assert "The server’s default (qwen2.5:7b)" in html
    response = logged_in.post(url(profile), {**VALID, "model": f"{second.pk}|深度-r1"})
    assert response.status_code == 302
    profile.refresh_from_db()
    assert (profile.model, profile.model_connection_id) == ("深度-r1", second.pk)
    assert f'<option value="{second.pk}|深度-r1" selected>' in logged_in.get(url(profile)).content.decode()
    # The companion is answered by the connection its model came from, not the default one.
    reply = provider_for(Profile.objects.reread(profile)).complete([{"role": "user", "content": "你好"}])
    assert reply.content and away.requests[-1]["model"] == "深度-r1" and not home.requests


def test_a_model_no_longer_listed_stays_the_current_value_with_a_note(logged_in, profile, two_connections):
    first, second, home, away = two_connections
    Profile.objects.filter(pk=profile.pk).update(model="llama3.1:8b", model_connection=second)
    away.models = ["llama3.2:3b"]  # the server dropped it
    html = logged_in.get(url(profile)).content.decode()
    assert f'<option value="{second.pk}|llama3.1:8b" selected>llama3.1:8b (Hosted ☁️; no longer listed)</option>' in html
    assert "“llama3.1:8b” is no longer listed; it stays this companion’s model" in html  # in full, for narrow screens
    # Saving the page unchanged keeps it, connection and all.
    assert logged_in.post(url(profile), {**VALID, "model": f"{second.pk}|llama3.1:8b"}).status_code == 302
    assert Profile.objects.filter(pk=profile.pk, model="llama3.1:8b", model_connection=second).exists()
    # Its server down: still shown, still kept.
    away.stop()
    html = logged_in.get(url(profile)).content.decode()
    assert f'<option value="{second.pk}|llama3.1:8b" selected>' in html


def test_a_model_of_a_connection_that_is_gone_is_refused_by_name(logged_in, profile, two_connections):
    first, second, home, away = two_connections
    response = logged_in.post(url(profile), {**VALID, "model": "999|llama3.1:8b"})
    assert response.status_code == 400 and "999|llama3.1:8b" in response.content.decode()
    assert Profile.objects.get(pk=profile.pk).model_connection_id is None


def test_the_companion_list_follows_a_connection_added_in_another_process(logged_in, profile, two_connections):
    first, second, home, away = two_connections
    third_server = FakeLLMServer(models=["mistral-nemo"]).start()
    try:
        # Another process adds a connection (the row and the version, as its view does).
        Connection.objects.create(name="third", base_url=third_server.base_url)
        ModelChoice.bump()
        assert "mistral-nemo" in logged_in.get(url(profile)).content.decode()
    finally:
        third_server.stop()


def test_the_ollama_found_by_itself_is_offered_beside_the_stored_connections(logged_in, profile, settings):
    settings.PREVIOUSLY_LLM_BASE_URL = ""
    ollama = FakeLLMServer(models=["qwen2.5:3b"]).start()  # stands in for Ollama on its port
    stored = FakeLLMServer(models=["llama3.1:8b"]).start()
    settings.PREVIOUSLY_OLLAMA_URL = ollama.base_url
    Connection.objects.create(name="not chosen", base_url=stored.base_url)
    reset_provider(None)
    try:
        html = logged_in.get(url(profile)).content.decode()
        assert '<optgroup label="Ollama on this machine">' in html and '<option value="qwen2.5:3b">' in html
        assert '<optgroup label="not chosen">' in html
        assert logged_in.post(url(profile), {**VALID, "model": "qwen2.5:3b"}).status_code == 302
        assert Profile.objects.filter(pk=profile.pk, model="qwen2.5:3b", model_connection=None).exists()
    finally:
        reset_provider(None)
        ollama.stop()
        stored.stop()
