"""K12: the Previously On page, the card at any slice, isolation."""

import pytest
from django.urls import reverse

from memory.models import CardSnapshot
from tests.factories import ProfileFactory, UserFactory
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import make_slice, set_card

pytestmark = pytest.mark.django_db


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
