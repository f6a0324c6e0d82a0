"""K12, K13, S2: the slice page's transcript anchors, snapshot, runs and neighbours."""

from datetime import timedelta

import pytest
from django.urls import reverse

from memory.models import CardSnapshot, EvolutionRun
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import T0, make_slice
from tests.previously.pages.conftest import assert_no_inline_script

pytestmark = pytest.mark.django_db


def test_the_slice_page_shows_transcript_anchors_snapshot_and_runs(logged_in, profile):
    s = make_slice(profile, lines=[("user", "我今天跑了 5 公里"), ("assistant", "太棒了")])
    CardSnapshot.objects.create(profile=profile, slice=s, text=SEED_CARD)
    EvolutionRun.objects.create(profile=profile, slice=s, trigger="slice_close", status="changed", summary="Added the run.")
    html = logged_in.get(reverse("slice", args=[s.key])).content.decode()
    for m in s.messages.all():
        assert f'id="msg-{m.mid}"' in html
    assert "The card when it ended" in html and "Identity" in html and "Added the run." in html
    assert_no_inline_script(html)


def test_the_slice_page_links_its_neighbours(logged_in, profile):
    make_slice(profile, "2026-08-10-0900", at=T0 - timedelta(days=7))
    mid = make_slice(profile, "2026-08-12-0900", at=T0 - timedelta(days=5))
    make_slice(profile, "2026-08-14-0900", at=T0 - timedelta(days=3))
    html = logged_in.get(reverse("slice", args=[mid.key])).content.decode()
    assert "2026/08/10/0900" in html and "2026/08/14/0900" in html
