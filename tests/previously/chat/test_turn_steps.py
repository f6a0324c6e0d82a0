"""BENCH §4 (issue 24 point 11): with PREVIOUSLY_TURN_STEPS a turn logs how long each of its steps
before the first token took, which `make loadtest` sums up; without it, nothing is recorded."""

import logging

import pytest

from memory.models import Message
from previously.chat import steps
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)

ORDER = ["checked", "vector", "archived", "prepared", "echoed", "started", "model", "token"]


async def test_a_turn_logs_its_steps_once_in_order_when_the_logger_is_on(connect, user, profile, caplog, llm_provider):
    caplog.set_level(logging.DEBUG, logger=steps.log.name)
    chat = await connect(user)
    await chat.say("how long did each step take 每一步多久", mid=new_mid(1))
    lines = [r.getMessage() for r in caplog.records if r.name == steps.log.name]
    assert len(lines) == 1  # the first token only, not every token of the reply
    marks = steps.parse(lines[0])
    assert list(marks) == ORDER
    times = list(marks.values())
    assert times == sorted(times) and times[0] >= 0
    assert await Message.objects.filter(profile=profile).acount() == 2


async def test_off_a_turn_records_nothing(connect, user, profile, caplog, llm_provider):
    caplog.set_level(logging.INFO, logger=steps.log.name)
    recorded = []
    real_step = steps.step
    chat = await connect(user)
    steps.step = lambda name: recorded.append(steps._steps.get()) or real_step(name)
    try:
        await chat.say("nothing timed here 不计时", mid=new_mid(2))
    finally:
        steps.step = real_step
    assert recorded and all(r is None for r in recorded)
    assert not [r for r in caplog.records if r.name == steps.log.name]


def test_parse_reads_a_logged_line_and_nothing_else():
    assert steps.parse("2026-12-05 INFO x turn steps checked=6.41 token=80.20") == {"checked": 6.41, "token": 80.2}
    assert steps.parse("127.0.0.1:1 - - WSCONNECT /ws/chat/p1/") is None
