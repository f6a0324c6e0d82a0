"""K11: every step of a run reaches the profile's channel-layer group as a page event."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from memory.models import EvolutionRun
from previously.agent.evolve import create_run, execute_run
from previously.llm import reset_provider
from previously.llm.offline import Offline
from previously.push import profile_group
from tests.llm_server import Turn
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db


def listen(profile) -> tuple:
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(profile_group(profile.pk), channel)
    return layer, channel


def received(layer, channel, count: int) -> list[dict]:
    return [async_to_sync(layer.receive)(channel) for _ in range(count)]


def test_a_group_member_receives_started_tool_and_finished_frames(profile, llm_server, llm_provider):
    slice_ = make_slice(profile, lines=[("user", "call me Mei")])
    layer, channel = listen(profile)
    llm_server.script(
        Turn(tool_calls=[("set_identity", {"field": "Name", "value": "Mei", "refs": [slice_.ref]})]),
        Turn(tool_calls=[("finish", {"summary": "Learned her name is Mei."})]),
    )

    run = execute_run(create_run(profile=profile, slice_=slice_, trigger="explicit").pk)

    frames = received(layer, channel, 4)
    assert [f["event"] for f in frames] == ["started", "tool", "tool", "finished"]
    assert {f["type"] for f in frames} == {"page.event"}
    assert {f["run_id"] for f in frames} == {run.pk}
    assert frames[-1]["status"] == "changed"
    assert 'id="evolution"' in frames[-1]["html"]
    assert "Learned her name is Mei." in frames[-1]["html"]
    assert "+- Name: Mei" in frames[-1]["html"]
    assert "set_identity" in frames[1]["html"]


def test_a_skipped_run_is_reported_with_its_reason(profile):
    slice_ = make_slice(profile, lines=[("user", "hi")])
    layer, channel = listen(profile)
    reset_provider(Offline())
    try:
        execute_run(create_run(profile=profile, slice_=slice_, trigger="slice_close").pk)
    finally:
        reset_provider(None)

    (frame,) = received(layer, channel, 1)
    assert (frame["event"], frame["status"]) == ("skipped", EvolutionRun.Status.SKIPPED)
    assert "no model configured" in frame["html"]


def test_other_profiles_hear_nothing(profile, llm_server, llm_provider):
    from tests.factories import ProfileFactory

    other = ProfileFactory()
    layer, channel = listen(other)
    slice_ = make_slice(profile, lines=[("user", "hi")])
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "Nothing."})]))

    execute_run(create_run(profile=profile, slice_=slice_, trigger="manual").pk)

    assert async_to_sync(nothing_arrives)(layer, channel)


async def nothing_arrives(layer, channel) -> bool:
    try:
        await asyncio.wait_for(layer.receive(channel), 0.3)
    except TimeoutError:
        return True
    return False
