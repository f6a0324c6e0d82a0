"""Shared set-up for the agent tests: a profile with real slices and messages."""

from datetime import UTC, datetime, timedelta

from memory.models import Card, Message, Slice
from tests.factories import MessageFactory, SliceFactory

T0 = datetime(2026, 8, 17, 5, 15, tzinfo=UTC)


def make_slice(profile, key="2026-08-17-0515", *, closed=True, lines=(), at=T0) -> Slice:
    slice_ = SliceFactory(profile=profile, key=key, started_at=at, last_message_at=at, tz="UTC")
    for k, (speaker, text) in enumerate(lines):
        MessageFactory(
            profile=profile,
            slice=slice_,
            speaker=speaker,
            content=text,
            created_at=at + timedelta(minutes=k),
            mid=f"c_{slice_.pk:08x}{k:08x}" if speaker == Message.Speaker.USER else f"a_1760000000{slice_.pk:03d}_{k:04d}",
        )
    if closed:
        slice_.close(reason=Slice.CloseReason.GAP, at=at + timedelta(minutes=len(lines)))
    return slice_


def set_card(profile, text: str, version: int = 1) -> Card:
    card, _ = Card.objects.update_or_create(profile=profile, defaults={"text": text, "version": version})
    return card
