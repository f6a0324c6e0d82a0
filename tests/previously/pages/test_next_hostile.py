"""Issue 16 point 6 (SPEC S5): `next` only ever leads inside the site — no redirect to another
host and no `javascript:` href on the delete confirmation."""

import pytest
from django.urls import reverse

from memory.models import Favourite
from previously.pages.safe_urls import local_path
from tests.factories import HighlightFactory, MessageFactory, ProfileFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("value", "kept"), [
    ("/archive/?q=1", True), ("/", True), ("https://evil.example/", False), ("//evil.example/", False),
    ("/\\evil.example", False), ("javascript:alert(1)", False), ("/ok\n", False), ("", False), (None, False),
    ("http:/evil", False), ("/p/owner/messages/", True),
])
def test_local_path_keeps_only_paths_on_this_site(value, kept):
    assert local_path(value) == (value if kept else None)


@pytest.mark.parametrize("target", ["https://evil.example/x", "//evil.example", "javascript:alert(1)"])
def test_new_conversation_never_redirects_off_the_site(client, target):
    user = UserFactory()
    ProfileFactory(user=user, key="owner")
    client.force_login(user)
    response = client.post(reverse("new_conversation"), {"next": target})
    assert response.status_code == 302 and response["Location"] == reverse("home")


def test_the_delete_confirmation_never_renders_a_javascript_cancel_link(client):
    user = UserFactory()
    profile = ProfileFactory(user=user, key="owner")
    message = MessageFactory(profile=profile, mid="c_00000000000000aa", content="kept line")
    HighlightFactory(profile=profile, message=message, mid=message.mid, content="kept line")
    client.force_login(user)
    response = client.post(reverse("curation:delete", args=["owner", message.mid]), {"next": "javascript:alert(1)"})
    assert response.status_code == 409
    assert "javascript:" not in response.content.decode()


@pytest.mark.parametrize("target", ["https://evil.example/x", "//evil.example", "javascript:alert(1)"])
def test_unfavouriting_a_line_never_redirects_off_the_site(client, target):
    """Issue 24 point 9: the chat's unfavourite POST followed any `next`."""
    user = UserFactory()
    profile = ProfileFactory(user=user, key="owner")
    message = MessageFactory(profile=profile, mid="c_00000000000000ab", content="kept line")
    client.force_login(user)
    client.post(reverse("chat_favourite", args=[message.mid]), {"excerpt": ""})
    fav = Favourite.objects.get(message=message)
    response = client.post(reverse("chat_unfavourite", args=[fav.pk]), {"next": target})
    assert response.status_code == 302 and response["Location"] == f"{reverse('home')}#msg-{message.mid}"
