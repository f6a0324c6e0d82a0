"""The person first (issue 26, L4): a person's turn never waits behind background model work.

A local model server (llama.cpp, Ollama on a CPU) answers one request at a time, so a
welcome-back message, a proactive message, the turn analyzer or an evolution step being
generated when the person sends a line would hold their reply back for as long as it runs.

- The chat marks its turns with `turn()` (a context manager, entered on the event loop, never
  blocking).
- Every background call (`OpenAICompatible.complete`: agent steps, the analyzer, proactive and
  welcome-back messages) first waits in `wait_idle` while a turn is in flight (at most
  `patience` seconds, then it goes ahead: background work is delayed, never starved).
- A background call without tools is streamed and checks `turn_in_flight()` at every chunk: a
  turn starting meanwhile closes it (the server stops generating when its client goes away) and
  it is tried again once the turn is over (`Preempted`). A tool-calling agent step is not
  streamed (small local servers cannot stream tool calls reliably); it is capped by its
  `max_tokens` and the next step waits.

- A person typing counts too (`typing()`, from the chat page's keystrokes, for
  PREVIOUSLY_TYPING_HOLD_SECONDS after the last; the page sends one every 2 s at most): a CPU server cannot stop reading a prompt it has begun, so a
  welcome-back set aside only when the line is sent would still hold the reply back for the
  rest of its prompt. Set aside at the first keystroke, that prompt is read while they type.

The gate is per process. With several server processes and a task worker (O3), a turn holds
the background calls of its own process only; a worker's evolution step may still be in flight
on a shared model server when a turn in another process starts (the step is capped by
PREVIOUSLY_AGENT_STEP_MAX_TOKENS, which bounds that wait).
"""

import contextlib
import threading
import time
from collections.abc import Iterator

from django.conf import settings

_lock = threading.Condition()
_turns = 0
_typing_until = 0.0


@contextlib.contextmanager
def turn() -> Iterator[None]:
    """Mark a person's turn in flight for the block's duration (never blocks)."""
    global _turns
    with _lock:
        _turns += 1
    try:
        yield
    finally:
        with _lock:
            _turns -= 1
            _lock.notify_all()


def typing(hold: float | None = None) -> None:
    """A person is typing a line: for `hold` seconds (PREVIOUSLY_TYPING_HOLD_SECONDS) background
    calls wait and a streamed one gives way, as for a turn (never blocks; 0 turns it off)."""
    global _typing_until
    hold = settings.PREVIOUSLY_TYPING_HOLD_SECONDS if hold is None else hold
    if hold <= 0:
        return
    with _lock:
        _typing_until = max(_typing_until, time.monotonic() + hold)


def turn_in_flight() -> bool:
    return _turns > 0


def person_waiting() -> bool:
    """A turn in flight, or a line being typed: what background calls give way to."""
    return _turns > 0 or time.monotonic() < _typing_until


def wait_idle(patience: float) -> float:
    """Block (a background thread) while a person is waiting (`person_waiting`), at most
    `patience` seconds; the seconds waited."""
    started = time.monotonic()
    deadline = started + patience
    with _lock:
        while True:
            now = time.monotonic()
            if now >= deadline or (_turns == 0 and now >= _typing_until):
                break
            # A turn's end notifies; the end of a typing hold is a time, so wake for it.
            _lock.wait(timeout=(deadline if _turns else min(deadline, _typing_until)) - now)
    return time.monotonic() - started
