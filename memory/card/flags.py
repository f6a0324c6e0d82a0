"""What the evolution agent is told about the card: stale/overdue flags and usage.

Flags are computed from a given ``today`` (the user's local date) and never change the
card: K5 and K6 leave every decision to the agent, and code never deletes silently.
"""

from dataclasses import dataclass
from datetime import date
from typing import Literal

from . import limits
from .format import Card


@dataclass(frozen=True)
class Flag:
    section: Literal["Now", "Horizon"]
    index: int  # 1-based, as the tools take it
    kind: Literal["stale", "overdue"]
    days: int  # how old (stale) or how late (overdue)
    message: str


def flags(card: Card, *, today: date) -> list[Flag]:
    """Now items older than 7 days (K5) and Horizon items past their by: date (K6)."""
    found: list[Flag] = []
    for k, item in enumerate(card.now, 1):
        age = (today - item.since).days
        if age > limits.NOW_STALE_AFTER_DAYS:
            found.append(
                Flag(
                    "Now",
                    k,
                    "stale",
                    age,
                    (
                        f"Now {k} is {age} days old (since {item.since}): {item.text!r} — stale:"
                        f" promote to Past (promote_now) or drop (remove_now)"
                    ),
                )
            )
    for k, item in enumerate(card.horizon, 1):
        late = (today - item.by).days
        if late > 0:
            found.append(
                Flag(
                    "Horizon",
                    k,
                    "overdue",
                    late,
                    (
                        f"Horizon {k} is overdue by {late} day{'s' if late != 1 else ''} (by {item.by}):"
                        f" {item.text!r} — keep it; ask the user how it went, then resolve_horizon"
                    ),
                )
            )
    return found


def usage(card: Card) -> str:
    """One line per section: how full the card is against its K2 limits."""
    return "\n".join(
        (
            f"Identity {len(card.identity)}/{limits.IDENTITY_MAX_LINES} lines",
            f"Past portrait chars {len(card.portrait)}/{limits.PORTRAIT_MAX_CHARS}",
            f"Past anchor facts {len(card.facts)}/{limits.ANCHOR_FACTS_MAX}",
            f"Now {len(card.now)}/{limits.NOW_MAX}",
            f"Horizon {len(card.horizon)}/{limits.HORIZON_MAX}",
            f"Self-model lessons {len(card.lessons)}/{limits.LESSONS_MAX}",
        )
    )
