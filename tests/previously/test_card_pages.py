"""K12, K13, S2: the Previously On page, the card at any slice, slice transcripts, isolation."""

import pytest
from django.urls import reverse

from memory.models import CardSnapshot, Message, SliceLogEntry
from tests.factories import MessageFactory, ProfileFactory, UserFactory
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import make_slice, set_card

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


def test_the_card_page_requires_login(client):
    response = client.get(reverse("card"))
    assert response.status_code == 302 and reverse("login") in response.url


def test_the_card_page_shows_sections_usage_flags_and_ref_links(logged_in, profile):
    set_card(profile, SEED_CARD)
    make_slice(profile, "2026-08-11-1426")

    html = logged_in.get(reverse("card")).content.decode()

    assert "Previously On" in html
    assert "Alias: 小艾" in html
    assert "Identity <small class=\"usage\">3/8 lines</small>" in html
    assert "2 /8 facts" not in html and "2/8 facts" in html
    assert 'href="/slices/2026-08-11-1426/">[2026/08/11/1426]</a>' in html
    assert "overdue by" in html  # the Horizon item's by: 2026-08-21 is past
    assert "<script" not in html.split("<main")[1]


def test_the_card_as_it_was_when_a_slice_ended(logged_in, profile):
    set_card(profile, SEED_CARD)
    old = make_slice(profile, "2026-08-02-1105")
    CardSnapshot.objects.create(profile=profile, slice=old, text=SEED_CARD.replace("Alex", "Alexandra"))

    html = logged_in.get(reverse("card"), {"at": old.key}).content.decode()

    assert "The card as it was when slice 2026/08/02/1105 ended." in html
    assert "Name: Alexandra" in html
    now_html = logged_in.get(reverse("card")).content.decode()
    assert "Name: Alex\n" in now_html or "Name: Alex " in now_html


def test_htmx_gets_only_the_dialog_fragment(logged_in, profile):
    set_card(profile, SEED_CARD)
    html = logged_in.get(reverse("card"), HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<section class="previously-on"')
    assert "<html" not in html


def test_a_slice_page_shows_every_line_and_the_cognitive_log(logged_in, profile):
    slice_ = make_slice(profile, lines=[("user", "我今天跑了 5 公里 🏃"), ("assistant", "太棒了!")])
    SliceLogEntry.objects.create(slice=slice_, kind="analyzer", summary="worth evolving: new habit")
    CardSnapshot.objects.create(profile=profile, slice=slice_, text="")

    html = logged_in.get(reverse("slice", args=[slice_.key])).content.decode()

    assert "我今天跑了 5 公里 🏃" in html and "太棒了!" in html
    assert "worth evolving: new habit" in html
    assert f"/card/?at={slice_.key}" in html


def test_deleted_lines_are_not_shown(logged_in, profile):
    from django.utils import timezone

    slice_ = make_slice(profile)
    MessageFactory(profile=profile, slice=slice_, content="gone for good", deleted_at=timezone.now())
    html = logged_in.get(reverse("slice", args=[slice_.key])).content.decode()
    assert "gone for good" not in html


def test_other_users_slices_and_profiles_are_404(client, profile):
    slice_ = make_slice(profile, "2026-08-17-0515", lines=[("user", "alice's secret")])
    bob = UserFactory()
    ProfileFactory(user=bob, key="owner")
    client.force_login(bob)

    assert client.get(reverse("slice", args=[slice_.key])).status_code == 404
    assert client.get(reverse("slice", args=[slice_.key]), {"profile": "owner"}).status_code == 404
    assert client.get(reverse("card"), {"at": slice_.key}).status_code == 404
    html = client.get(reverse("card")).content.decode()
    assert "alice's secret" not in html


def test_another_of_my_profiles_by_query(logged_in, user, profile):
    other = ProfileFactory(user=user, key="coach")
    slice_ = make_slice(other, lines=[("user", "coach line")])
    url = reverse("slice", args=[slice_.key])
    assert logged_in.get(url).status_code == 404  # not in the default profile
    assert "coach line" in logged_in.get(url, {"profile": "coach"}).content.decode()


def test_new_conversation_closes_the_open_slice(logged_in, profile):
    from previously.llm import reset_provider
    from previously.llm.offline import Offline

    slice_ = make_slice(profile, closed=False, lines=[("user", "hi")])
    reset_provider(Offline())
    try:
        response = logged_in.post(reverse("new_conversation"))
    finally:
        reset_provider(None)

    assert response.status_code == 302
    slice_.refresh_from_db()
    assert slice_.ended_at is not None
    assert Message.objects.filter(slice=slice_).count() == 1
