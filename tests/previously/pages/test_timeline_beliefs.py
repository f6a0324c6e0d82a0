"""The timeline (S1, S2, K8, K11), the slice page (K12, K13) and the beliefs page (K, C)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memory.deletion import hide_message
from memory.models import CardSnapshot, EvolutionRun, Experience, Slice
from previously.pages.timeline import views as timeline_views
from tests.factories import ExperienceFactory, HighlightFactory, ProfileFactory, UserFactory
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import T0, make_slice, set_card
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


def test_another_users_timeline_and_slices_are_invisible(client, profile):
    s = make_slice(profile, lines=[("user", "alice's secret")])
    client.force_login(UserFactory())
    assert "alice" not in client.get(reverse("timeline")).content.decode()
    assert client.get(reverse("slice", args=[s.key])).status_code == 404
    assert client.get(reverse("timeline"), {"profile": "owner"}).status_code == 200  # the stranger's own
    assert Slice.objects.count() == 1


def test_the_beliefs_page_shows_card_experiences_highlights_and_counts(logged_in, profile):
    set_card(profile, SEED_CARD)
    s = make_slice(profile, lines=[("user", "I love the sea"), ("assistant", "Me too")])
    msg = s.messages.first()
    HighlightFactory(profile=profile, message=msg, content="I love the sea")
    cand = ExperienceFactory(profile=profile, title="Moved to Hangzhou", status="candidate")
    ExperienceFactory(profile=profile, title="Runs every morning", status="active")
    html = logged_in.get(reverse("beliefs")).content.decode()
    assert "Identity" in html  # the live card
    assert "Moved to Hangzhou" in html and "Runs every morning" in html
    assert reverse("curation:experience_action", args=["owner", cand.eid, "confirm"]) in html
    assert "I love the sea" in html and f"#msg-{msg.mid}" in html
    assert reverse("curation:relations", args=["owner"]) in html
    assert "<strong>1</strong> to review" in html and "<strong>1</strong> confirmed experiences" in html
    assert_no_inline_script(html)


def test_confirming_from_the_beliefs_page_works_without_javascript(logged_in, profile):
    cand = ExperienceFactory(profile=profile, title="Moved to Hangzhou", status="candidate")
    url = reverse("curation:experience_action", args=["owner", cand.eid, "confirm"])
    assert logged_in.post(url, {"next": reverse("beliefs")}).status_code == 302
    cand.refresh_from_db()
    assert cand.status == Experience.Status.ACTIVE


def test_the_beliefs_page_query_count_is_bounded(logged_in, profile):
    def count():
        with CaptureQueriesContext(connection) as ctx:
            logged_in.get(reverse("beliefs"))
        return len(ctx.captured_queries)

    def add(k):
        ExperienceFactory(profile=profile, title=f"exp {k}", status="candidate" if k % 2 else "active")
        s = make_slice(profile, f"2026-07-{k + 1:02d}-1000", lines=[("user", f"line {k}")], at=T0 - timedelta(days=40 - k))
        HighlightFactory(profile=profile, message=s.messages.first(), content=f"line {k}")

    add(0)
    add(1)
    count()
    few = count()
    for k in range(2, 18):
        add(k)
    assert count() == few


def test_another_users_beliefs_are_invisible(client, profile):
    ExperienceFactory(profile=profile, title="alice's private fact", status="active")
    client.force_login(UserFactory())
    assert "alice's private fact" not in client.get(reverse("beliefs")).content.decode()
    other = ProfileFactory(key="coach")
    assert client.get(reverse("beliefs"), {"profile": other.key}).status_code == 404
