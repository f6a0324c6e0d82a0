"""How long each step of a turn took before its first token (BENCH §4), for `make loadtest`.

Off unless the `previously.chat.steps` logger is enabled for DEBUG (PREVIOUSLY_TURN_STEPS, or
PREVIOUSLY_LOG_LEVEL=DEBUG): then a turn whose reply streams logs one line as its first token
is sent, "turn steps checked=6.41 vector=6.67 … token=80.20", each figure the milliseconds
since its frame arrived. Off, a step costs one context variable read.
"""

import logging
import time
from contextvars import ContextVar

log = logging.getLogger(__name__)

PREFIX = "turn steps "

# The frame's arrival and the steps so far, (name, time.monotonic()); None when off.
_steps: ContextVar[list | None] = ContextVar("turn_steps", default=None)


def begin() -> None:
    """A frame arrived: the turn it starts (a task started from here) times its steps from now."""
    _steps.set([("frame", time.monotonic())] if log.isEnabledFor(logging.DEBUG) else None)


def step(name: str) -> None:
    """The step `name` of this turn is done."""
    steps = _steps.get()
    if steps is not None:
        steps.append((name, time.monotonic()))


def first_token() -> None:
    """The turn's first token was sent: log its steps, once."""
    steps = _steps.get()
    if steps is None:
        return
    _steps.set(None)
    step_times = [*steps[1:], ("token", time.monotonic())]
    start = steps[0][1]
    log.debug("%s%s", PREFIX, " ".join(f"{name}={(at - start) * 1000:.2f}" for name, at in step_times))


def parse(line: str) -> dict[str, float] | None:
    """The steps of one logged line (`first_token`), in order, ms since the frame; None for any
    other line."""
    _, found, rest = line.partition(PREFIX)
    if not found:
        return None
    pairs = (part.partition("=") for part in rest.split())
    return {name: float(value) for name, _, value in pairs}
