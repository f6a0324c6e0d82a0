"""S1, S2, K8: closing slices records the card as it was; the idle check closes them."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from memory.archive import archive_message
from memory.models import CardSnapshot, EvolutionRun, Slice, SliceLogEntry
from memory.slices import close_idle_slices, close_slice
from previously.agent.lifecycle import new_conversation, slice_closed
from previously.llm import reset_provider
from previously.llm.offline import Offline
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import make_slice, set_card

pytestmark = pytest.mark.django_db


@pytest.fixture
def offline():
    reset_provider(Offline())
    yield
    reset_provider(None)


def test_closing_a_slice_snapshots_the_current_card(profile):
    set_card(profile, SEED_CARD, version=4)
    slice_ = make_slice(profile, closed=False, lines=[("user", "hi")])

    assert close_slice(slice_, reason=Slice.CloseReason.NEW_CONVERSATION)

    snap = CardSnapshot.objects.get(slice=slice_)
    assert (snap.text, snap.card_version) == (SEED_CARD, 4)
    assert SliceLogEntry.objects.filter(slice=slice_, data__event="closed").exists()
    assert not close_slice(slice_, reason=Slice.CloseReason.GAP)


def test_close_idle_slices_closes_only_idle_ones(profile):
    now = timezone.now()
    idle = make_slice(profile, "2026-08-17-0515", closed=False, at=now - timedelta(hours=2))
    warm = make_slice(profile, "2026-08-17-0516", closed=False, at=now - timedelta(minutes=5))

    closed = close_idle_slices(now=now)

    assert [s.pk for s in closed] == [idle.pk]
    idle.refresh_from_db()
    warm.refresh_from_db()
    assert (idle.close_reason, warm.ended_at) == (Slice.CloseReason.IDLE_CHECK, None)
    assert CardSnapshot.objects.filter(slice=idle).exists()


def test_the_close_idle_slices_command_closes_and_queues_runs(profile, offline):
    idle = make_slice(profile, closed=False, at=timezone.now() - timedelta(hours=2), lines=[("user", "hi")])
    out = StringIO()

    call_command("close_idle_slices", stdout=out)

    idle.refresh_from_db()
    assert idle.ended_at is not None
    run = EvolutionRun.objects.get(slice=idle)
    assert (run.trigger, run.status, run.skip_reason) == ("slice_close", "skipped", "no model configured")
    assert "closed 1 idle slice" in out.getvalue()


def test_a_gap_close_from_the_archive_gets_its_snapshot_and_run(profile, offline):
    set_card(profile, SEED_CARD)
    t = timezone.now() - timedelta(hours=3)
    archive_message(profile=profile, mid="c_0000000000000001", speaker="user", content="hi", created_at=t)
    later = archive_message(
        profile=profile, mid="c_0000000000000002", speaker="user", content="back", created_at=t + timedelta(hours=2)
    )

    slice_closed(later.closed_slice)

    assert CardSnapshot.objects.get(slice=later.closed_slice).text == SEED_CARD
    assert EvolutionRun.objects.get(slice=later.closed_slice).status == "skipped"


def test_new_conversation_closes_the_open_slice(profile, offline):
    slice_ = make_slice(profile, closed=False, lines=[("user", "hi")])

    closed = new_conversation(profile)

    assert closed.pk == slice_.pk
    slice_.refresh_from_db()
    assert slice_.close_reason == Slice.CloseReason.NEW_CONVERSATION
    assert EvolutionRun.objects.filter(slice=slice_).count() == 1
    assert new_conversation(profile) is None
