"""Every chat line has a menu with favourite (whole or part), hide and delete for good, the
archive page's own forms and confirmation (issue 17 point 5, SPEC U3)."""

import pytest
from django.test import Client
from django.urls import reverse

from memory.models import Favourite, Message
from tests.csp import assert_csp_clean
from tests.factories import HighlightFactory, MessageFactory, ProfileFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(user):
    profile = ProfileFactory(user=user, key="owner", language="en")
    said = MessageFactory(profile=profile, mid="c_00000000000000a1", content="我养了一只猫叫 Mochi 🐱")
    client = Client()
    client.force_login(user)
    return profile, said, client


def test_each_line_has_favourite_on_it_and_hide_and_delete_in_its_menu(page):
    profile, said, client = page
    response = client.get(reverse("home"))
    assert_csp_clean(response)
    html = response.content.decode()
    line = html[html.index(f'id="msg-{said.mid}"'):]
    line = line[: line.index("</article>")]
    # Favourite (whole line, or the words selected in it: chat.js fills `excerpt`) sits on the
    # line with its undo (C2); the menu holds hide and delete for good, as on the archive page.
    assert reverse("chat_favourite", args=[said.mid]) in line
    assert 'name="excerpt"' in line
    menu = line[line.index('<details class="line-menu">'):]
    for name in ("hide", "delete"):
        assert reverse(f"curation:{name}", args=[profile.key, said.mid]) in menu
    assert reverse("curation:favourite", args=[profile.key, said.mid]) not in menu  # one favourite button


def test_favourite_a_part_and_delete_through_the_same_confirmation(page):
    profile, said, client = page
    response = client.post(
        reverse("curation:favourite", args=[profile.key, said.mid]), {"excerpt": "一只猫"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert Favourite.objects.get(profile=profile).highlight.content == "一只猫"
    HighlightFactory(message=said, content="Mochi")
    refused = client.post(reverse("curation:delete", args=[profile.key, said.mid]), HTTP_HX_REQUEST="true")
    assert "This message is referenced." in refused.content.decode()  # the refs are listed first
    assert Message.objects.filter(pk=said.pk).exists()
    client.post(reverse("curation:delete", args=[profile.key, said.mid]), {"force": "1"}, HTTP_HX_REQUEST="true")
    assert not Message.objects.filter(pk=said.pk).exists()
