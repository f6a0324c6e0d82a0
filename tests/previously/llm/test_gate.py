"""The person first (issue 26 point 2, L4): background model calls wait while a person's turn
is in flight, and a background reply being generated gives way to a turn that starts."""

import threading
import time

from previously.llm import gate
from tests.llm_server import Turn


def test_a_background_call_waits_while_a_turn_is_in_flight(llm_server, llm_provider):
    llm_server.script(Turn(content="later"))
    done = {}

    def background():
        done["text"] = llm_provider.complete([{"role": "user", "content": "welcome back"}]).content
        done["at"] = time.monotonic()

    with gate.turn():
        worker = threading.Thread(target=background)
        worker.start()
        time.sleep(0.5)
        assert llm_server.requests == []  # nothing reached the model while the turn runs
        ended = time.monotonic()
    worker.join(5)
    assert done["text"] == "later" and done["at"] >= ended


def test_a_background_reply_gives_way_to_a_turn_and_is_generated_again_after_it(llm_server, llm_provider):
    llm_server.script(
        Turn(chunks=[f"w{i} " for i in range(40)], chunk_delay=0.05),  # a slow welcome-back
        Turn(chunks=["Welcome ", "back!"]),
    )
    done = {}
    worker = threading.Thread(target=lambda: done.update(
        text=llm_provider.complete([{"role": "user", "content": "welcome back"}]).content))
    worker.start()
    while not llm_server.requests:
        time.sleep(0.01)
    time.sleep(0.2)  # it is writing
    with gate.turn():
        time.sleep(0.3)  # the person's reply streams; the background stream was closed
        assert llm_server.closed_streams == 1 and len(llm_server.requests) == 1
    worker.join(5)
    assert done["text"] == "Welcome back!" and len(llm_server.requests) == 2


def test_a_tool_calling_step_is_not_streamed_but_waits(llm_server, llm_provider):
    llm_server.script(Turn(tool_calls=[("finish", {"summary": "ok"})]))
    tools = [{"type": "function", "function": {"name": "finish", "parameters": {"type": "object"}}}]
    completion = llm_provider.complete([{"role": "user", "content": "go"}], tools=tools, max_tokens=99)
    assert completion.tool_calls[0].name == "finish"
    assert llm_server.requests[-1].get("stream") in (None, False) and llm_server.requests[-1]["max_tokens"] == 99


def test_with_turns_first_off_a_background_call_goes_ahead(llm_server, llm_provider, settings):
    settings.PREVIOUSLY_LLM_TURNS_FIRST = False
    llm_server.script(Turn(content="now"))
    with gate.turn():
        assert llm_provider.complete([{"role": "user", "content": "x"}]).content == "now"
    assert llm_server.requests[-1].get("stream") in (None, False)


def test_a_background_reply_gives_way_while_a_line_is_typed_and_is_written_after(llm_server, llm_provider):
    """Issue 26 point 2, seen against llama-cpp-python: a CPU server does not stop reading a
    prompt it has begun, so a welcome-back set aside only at Send still held the reply back
    (first word 30.7 s, 10.8 s without). A keystroke sets it aside at once, and it waits until
    the typing hold is over."""
    llm_server.script(
        Turn(chunks=[f"w{i} " for i in range(40)], chunk_delay=0.05),
        Turn(chunks=["Welcome ", "back!"]),
    )
    done = {}
    worker = threading.Thread(target=lambda: done.update(
        text=llm_provider.complete([{"role": "user", "content": "welcome back"}]).content, at=time.monotonic()))
    worker.start()
    while not llm_server.requests:
        time.sleep(0.01)
    time.sleep(0.2)  # it is writing
    gate.typing(hold=0.6)
    typed = time.monotonic()
    assert gate.person_waiting() and not gate.turn_in_flight()
    time.sleep(0.3)
    assert llm_server.closed_streams == 1 and len(llm_server.requests) == 1  # set aside, not asked again yet
    worker.join(5)
    assert done["text"] == "Welcome back!" and done["at"] >= typed + 0.6
    assert not gate.person_waiting()


def test_a_background_call_waits_for_the_typing_hold_to_pass(llm_server, llm_provider):
    llm_server.script(Turn(content="later"))
    gate.typing(hold=0.5)
    began = time.monotonic()
    assert llm_provider.complete([{"role": "user", "content": "x"}]).content == "later"
    assert time.monotonic() - began >= 0.45 and len(llm_server.requests) == 1
