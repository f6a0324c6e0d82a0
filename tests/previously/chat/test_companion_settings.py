"""Issue 17 point 8 over the socket: the model and temperature set on the companion settings
page reach the model server's request for the streamed reply, changed between turns without
reconnecting; and the slice's zone is kept on the profile for the pages (point 9)."""

import pytest
from channels.db import database_sync_to_async

from memory.models import Profile
from tests.llm_server import Turn
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def set_settings(profile, **fields):
    Profile.objects.filter(pk=profile.pk).update(**fields)


@database_sync_to_async
def stored_zone(profile):
    return Profile.objects.get(pk=profile.pk).tz


async def test_the_chosen_model_and_temperature_reach_the_model_server(connect, user, profile, llm_server, llm_provider):
    chat = await connect(user)
    llm_server.script(Turn(chunks=["one"]), Turn(chunks=["two"]))
    await chat.say("第一句", mid=new_mid(1), tz="Europe/Berlin")
    first = llm_server.requests[-1]
    assert first["stream"] is True and first["model"] == "fake-model" and "temperature" not in first

    await set_settings(profile, model="qwen2.5:14b", temperature=0.2)  # saved on the page meanwhile
    await chat.say("second 🌙", mid=new_mid(2), tz="Europe/Berlin")
    second = llm_server.requests[-1]
    assert (second["model"], second["temperature"]) == ("qwen2.5:14b", 0.2)
    assert second["messages"][-1]["content"].endswith("second 🌙")
    assert await stored_zone(profile) == "Europe/Berlin"
