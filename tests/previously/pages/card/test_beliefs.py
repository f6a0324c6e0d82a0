"""The beliefs page (K, C): the card, experiences, highlights, counts; bounded queries."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memory.models import Experience
from tests.factories import ExperienceFactory, HighlightFactory, ProfileFactory, UserFactory
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import T0, make_slice, set_card
from tests.previously.pages.conftest import assert_no_inline_script

pytestmark = pytest.mark.django_db


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
