"""The whole loop over the chat socket (issue 4's "done when"): an explicit memory request in a
reply turn starts an evolution run at once (K10), its progress and diff reach the same page
(K11), and the card is written (K8)."""

import pytest
from channels.db import database_sync_to_async

from memory.models import Card, EvolutionRun
from tests.llm_server import Turn
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)


async def frames_until(chat, needle: str, timeout: float = 10) -> list[str]:
    frames = []
    while not any(needle in f for f in frames):
        frames.append(await chat.ws.receive_from(timeout=timeout))
    return frames


async def test_remember_request_streams_the_run_and_its_diff_to_the_page_k10_k11(connect, user, profile, llm_server, llm_provider):
    llm_server.script(
        Turn(chunks=["好的，", "我记住了。"]),  # the reply
        Turn(tool_calls=[("set_portrait", {"text": "Ana has a report due next Wednesday."})]),  # the agent
        Turn(tool_calls=[("finish", {"summary": "Noted the report due next Wednesday."})]),
    )
    chat = await connect(user)

    reply = await chat.say("记住我下周三要交报告", mid=new_mid(1))
    progress = await frames_until(chat, "Noted the report due next Wednesday.")

    assert "我记住了。" in reply[-1]
    assert any('id="evolution"' in f for f in progress)
    assert "+Ana has a report due next Wednesday." in "".join(progress).replace("&#x27;", "'")
    run = await database_sync_to_async(EvolutionRun.objects.get)(profile=profile)
    assert (run.trigger, run.status) == ("explicit", "changed")
    card = await database_sync_to_async(Card.objects.get)(profile=profile)
    assert "Ana has a report due next Wednesday." in card.text
