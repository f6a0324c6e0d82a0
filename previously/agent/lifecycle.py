"""What follows a slice close (S1, K10): the snapshot is taken by `memory.slices`; here the
run is recorded and queued — the analyzer's "worth it?" gate runs inside it, off the path."""

from datetime import datetime

from memory import slices
from memory.models import EvolutionRun, Profile, Slice
from previously.agent.analyzer import card_needs_migration
from previously.agent.evolve import start_run


def slice_closed(slice_: Slice) -> EvolutionRun:
    """Call when a slice has closed (e.g. `archive_message(...).closed_slice`): snapshot + run."""
    slices.on_closed(slice_)
    return _evolve_closed(slice_)


def _evolve_closed(slice_: Slice) -> EvolutionRun:
    # K10: a card in an older format forces a run (migration), without asking the analyzer.
    trigger = (
        EvolutionRun.Trigger.MIGRATION
        if card_needs_migration(slice_.profile)
        else EvolutionRun.Trigger.SLICE_CLOSE
    )
    return start_run(profile=slice_.profile, slice_=slice_, trigger=trigger)


def new_conversation(profile: Profile) -> Slice | None:
    """The user's "new conversation" action: close the open slice (S1) and evolve from it."""
    closed = slices.close_current_slice(profile)
    if closed is not None:
        _evolve_closed(closed)
    return closed


def close_idle_slices(*, now: datetime | None = None) -> list[Slice]:
    """The periodic check (S1): close idle slices, each followed by its evolution run."""
    closed = slices.close_idle_slices(now=now)
    for slice_ in closed:
        _evolve_closed(slice_)
    return closed
