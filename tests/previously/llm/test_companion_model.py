"""Issue 17 point 8: the model and temperature a companion's settings choose reach the model
server's request — for the chat's streamed reply, the agent and proactive messages — and an
unset companion falls back to the environment's."""

import pytest

from memory.models import Profile
from previously.llm.select import agent_model, provider_for
from tests.llm_server import Turn

pytestmark = pytest.mark.django_db


def test_a_companions_model_and_temperature_reach_the_server(profile, llm_server, llm_provider):
    Profile.objects.filter(pk=profile.pk).update(model="companion-7b", temperature=0.3)
    profile.refresh_from_db()
    llm_server.script(Turn(content="hi"))
    assert provider_for(profile).complete([{"role": "user", "content": "你好"}]).content == "hi"
    assert (llm_server.requests[-1]["model"], llm_server.requests[-1]["temperature"]) == ("companion-7b", 0.3)


def test_an_unset_companion_uses_the_environments_model_and_no_temperature(profile, llm_server, llm_provider):
    assert provider_for(profile) is llm_provider
    llm_provider.complete([{"role": "user", "content": "hello"}])
    assert llm_server.requests[-1]["model"] == "fake-model"
    assert "temperature" not in llm_server.requests[-1]


def test_the_agent_uses_the_companions_model_unless_one_is_set_for_it(profile, llm_provider, settings):
    settings.PREVIOUSLY_AGENT_MODEL = ""
    assert agent_model(profile) == "fake-model"
    profile.model = "companion-7b"
    assert agent_model(profile) == "companion-7b"
    settings.PREVIOUSLY_AGENT_MODEL = "agent-70b"
    assert agent_model(profile) == "agent-70b"


async def test_a_streamed_reply_carries_them_too(profile, llm_server, llm_provider):
    profile.model, profile.temperature = "stream-3b", 1.2
    chunks = [c async for c in provider_for(profile).astream([{"role": "user", "content": "hi"}])]
    assert "".join(chunks) == "Hello there!"
    assert (llm_server.requests[-1]["model"], llm_server.requests[-1]["temperature"]) == ("stream-3b", 1.2)
