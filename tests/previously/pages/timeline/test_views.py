"""The timeline (S1, S2, K8, K11): slices by day with counts and card changes, paged, isolated."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memory.deletion import hide_message
from memory.models import CardSnapshot, EvolutionRun, Slice
from previously.pages.timeline import views as timeline_views
from tests.factories import UserFactory
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import T0, make_slice
from tests.previously.pages.conftest import assert_no_inline_script

pytestmark = pytest.mark.django_db


def test_the_timeline_groups_slices_by_day_with_counts_and_card_changes(logged_in, profile):
    a = make_slice(profile, "2026-08-16-2010", lines=[("user", "晚上好"), ("assistant", "你好")], at=T0 - timedelta(hours=9))
    b = make_slice(profile, "2026-08-17-0515", lines=[("user", "早"), ("assistant", "早安"), ("user", "跑步去")])
    EvolutionRun.objects.create(profile=profile, slice=a, trigger="slice_close", status="skipped",
                                skip_reason="skipped: no model configured")
    EvolutionRun.objects.create(profile=profile, slice=b, trigger="slice_close", status="changed",
                                summary="Noted the morning run.", diff="+- Runs every morning [2026/08/17/0515]")
    CardSnapshot.objects.create(profile=profile, slice=b, text=SEED_CARD)
    html = logged_in.get(reverse("timeline")).content.decode()
    assert html.index('id="day-2026-08-17"') < html.index('id="day-2026-08-16"')
    assert "3 lines" in html and "2 lines" in html
    assert "Noted the morning run." in html and "+- Runs every morning" in html
    assert "skipped: no model configured" in html
    assert f'{reverse("card")}?at={b.key}&amp;profile=owner' in html
    assert f'{reverse("card")}?at={a.key}' not in html  # no snapshot, no link
    assert_no_inline_script(html)


def test_hidden_lines_are_not_counted(logged_in, profile):
    s = make_slice(profile, lines=[("user", "one"), ("user", "two")])
    hide_message(s.messages.first())
    assert "1 line" in logged_in.get(reverse("timeline")).content.decode()


def _queries(client) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("timeline")).status_code == 200
    return len(ctx.captured_queries)


def test_the_timeline_is_paged_with_a_bounded_query_count(logged_in, profile, monkeypatch):
    monkeypatch.setattr(timeline_views, "PAGE_SIZE", 3)
    for k in range(2):
        s = make_slice(profile, f"2026-08-0{k + 1}-1000", lines=[("user", f"hi {k}")], at=T0 - timedelta(days=20 - k))
        EvolutionRun.objects.create(profile=profile, slice=s, trigger="slice_close", status="unchanged")
    _queries(logged_in)
    few = _queries(logged_in)
    for k in range(2, 9):
        s = make_slice(profile, f"2026-08-0{k + 1}-1000", lines=[("user", f"hi {k}"), ("assistant", "yo")],
                       at=T0 - timedelta(days=20 - k))
        EvolutionRun.objects.create(profile=profile, slice=s, trigger="slice_close", status="unchanged")
    assert _queries(logged_in) == few
    first = logged_in.get(reverse("timeline"))
    assert first.context["next_before"] == "2026-08-07-1000"
    second = logged_in.get(reverse("timeline"), {"before": "2026-08-07-1000"})
    assert [s.key for _, day in second.context["days"] for s in day] == ["2026-08-06-1000", "2026-08-05-1000", "2026-08-04-1000"]
    assert logged_in.get(reverse("timeline"), {"before": "junk"}).status_code == 200


def test_another_users_timeline_and_slices_are_invisible(client, profile):
    s = make_slice(profile, lines=[("user", "alice's secret")])
    client.force_login(UserFactory())
    assert "alice" not in client.get(reverse("timeline")).content.decode()
    assert client.get(reverse("slice", args=[s.key])).status_code == 404
    assert client.get(reverse("timeline"), {"profile": "owner"}).status_code == 200  # the stranger's own
    assert Slice.objects.count() == 1


def test_a_run_that_changed_experiences_only_shows_them_as_a_memory_change(logged_in, profile):
    s = make_slice(profile, lines=[("user", "We moved to Lisbon 🇵🇹")])
    EvolutionRun.objects.create(
        profile=profile, slice=s, trigger="slice_close", status="changed", summary="Experiences: 1 invalidated.",
        diff="experiences:\n- exp_1_a no longer true since 2026-08-10: Home: Berlin — lives in Berlin",
    )
    html = logged_in.get(reverse("timeline")).content.decode()
    assert "Memory changed:" in html and "Card changed:" not in html
    assert "no longer true since 2026-08-10: Home: Berlin" in html
