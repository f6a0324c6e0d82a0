"""The data of memory: archive, slices, curation, deletion, the card, legacy keys, accounts."""

from memory.models.accounts import AccountSession, Invitation, SiteSwitch
from memory.models.archive import Message, MessageQuerySet, Profile, Slice, SliceLogEntry
from memory.models.card import Card, CardSnapshot, EvolutionRun
from memory.models.companion import CatchUp, CompanionCard, LoreEntry
from memory.models.connections import Connection, ModelChoice
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
    "AccountSession",
    "Invitation",
    "SiteSwitch",
    "Card",
    "CardSnapshot",
    "Connection",
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
    "ModelChoice",
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
