"""The machine's load average, printed beside every figure (the bench machine is shared)."""

import os


def load_numbers() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded; empty where the system has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def load_average() -> str:
    """The load averages as text, "0.53 / 0.25 / 0.23" ("n/a" where the system has none)."""
    return " / ".join(f"{x:.2f}" for x in load_numbers()) or "n/a"
