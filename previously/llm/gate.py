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

The gate is per process. With several server processes and a task worker (O3), a turn holds
the background calls of its own process only; a worker's evolution step may still be in flight
on a shared model server when a turn in another process starts (the step is capped by
PREVIOUSLY_AGENT_STEP_MAX_TOKENS, which bounds that wait).
"""

import contextlib
import threading
import time
from collections.abc import Iterator

_lock = threading.Condition()
_turns = 0


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


def turn_in_flight() -> bool:
    return _turns > 0


def wait_idle(patience: float) -> float:
    """Block (a background thread) while a turn is in flight, at most `patience` seconds; the
    seconds waited."""
    started = time.monotonic()
    with _lock:
        _lock.wait_for(lambda: _turns == 0, timeout=patience)
    return time.monotonic() - started
