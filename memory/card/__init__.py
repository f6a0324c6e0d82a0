"""The "Previously On" user card (K1–K9): format, limits, mutations, flags, injection.

Pure Python, no Django and no model calls: the agent proposes, this package disposes.
The one Django module is `memory.card.store` (load, commit, snapshots, the injected copy);
nothing here imports it.
"""

from .compare import same_substance
from .flags import Flag, flags, usage
from .format import (
    CURRENT_FORMAT,
    Card,
    CardFormatError,
    Fact,
    Header,
    HorizonItem,
    IdentityLine,
    Lesson,
    NowItem,
    detect_format,
    empty_card,
    parse,
    render,
    stamp,
)
from .inject import render_injected
from .mutations import TOOLS, MutationResult, RefsResolver, apply_tool

__all__ = [
    "CURRENT_FORMAT",
    "TOOLS",
    "Card",
    "CardFormatError",
    "Fact",
    "Flag",
    "Header",
    "HorizonItem",
    "IdentityLine",
    "Lesson",
    "MutationResult",
    "NowItem",
    "RefsResolver",
    "apply_tool",
    "detect_format",
    "empty_card",
    "flags",
    "parse",
    "render",
    "render_injected",
    "same_substance",
    "stamp",
    "usage",
]
