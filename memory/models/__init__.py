"""The data of memory: archive, slices, curation, deletion, the card, legacy keys."""

from memory.models.archive import Message, MessageQuerySet, Profile, Slice, SliceLogEntry
from memory.models.card import Card, CardSnapshot, EvolutionRun
from memory.models.companion import CatchUp, CompanionCard, LoreEntry
from memory.models.curation import (
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Favourite,
    Highlight,
    Relation,
)
from memory.models.deletion import Tombstone
from memory.models.legacy import LegacyFragment, LegacyMeta
from memory.models.proactive import ProactiveSend
from memory.models.recall import RecallDocument, RecallStats, RecallTerm, RecallVector

__all__ = [
    "Card",
    "CardSnapshot",
    "CatchUp",
    "CompanionCard",
    "EvolutionRun",
    "Experience",
    "ExperienceHistory",
    "ExperienceSource",
    "Favourite",
    "Highlight",
    "LegacyFragment",
    "LegacyMeta",
    "LoreEntry",
    "Message",
    "MessageQuerySet",
    "ProactiveSend",
    "Profile",
    "RecallDocument",
    "RecallStats",
    "RecallTerm",
    "RecallVector",
    "Relation",
    "Slice",
    "SliceLogEntry",
    "Tombstone",
]
