"""C2: favourite a chat line in place (whole or the selected words), unfavourite, and the
favourites page."""

import pytest

from memory.archive import archive_message
from memory.models import Favourite, Highlight
from tests.csp import assert_csp_clean

pytestmark = pytest.mark.django_db


@pytest.fixture
def line(profile):
    return archive_message(profile=profile, mid="c_00000000000000f1", speaker="user",
                           content="今天在湖边看到了一只白鹭 🕊️ standing very still").message


def test_a_chat_line_carries_a_favourite_button(logged_in, line):
    page = logged_in.get("/")
    assert_csp_clean(page)
    assert '/chat/favourite/c_00000000000000f1/' in page.content.decode()


def test_favourite_the_whole_line_then_remove_it(logged_in, profile, line):
    response = logged_in.post("/chat/favourite/c_00000000000000f1/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    fav = Favourite.objects.get()
    assert fav.excerpt == "" and fav.highlight.content == line.content
    assert f"/chat/unfavourite/{fav.pk}/" in response.content.decode()
    logged_in.post(f"/chat/unfavourite/{fav.pk}/", HTTP_HX_REQUEST="true")
    assert not Favourite.objects.exists()
    assert Highlight.objects.get().deleted_at is not None  # its highlight went with it (soft)
    assert Highlight.objects.usable().count() == 0


def test_favourite_the_selected_words_and_refuse_words_not_in_the_line(logged_in, profile, line):
    ok = logged_in.post("/chat/favourite/c_00000000000000f1/", {"excerpt": "一只白鹭 🕊️"}, HTTP_HX_REQUEST="true")
    assert ok.status_code == 200 and "“一只白鹭 🕊️”" in ok.content.decode()
    bad = logged_in.post("/chat/favourite/c_00000000000000f1/", {"excerpt": "a heron"}, HTTP_HX_REQUEST="true")
    assert bad.status_code == 422 and "Not saved" in bad.content.decode()
    assert list(Favourite.objects.values_list("excerpt", flat=True)) == ["一只白鹭 🕊️"]


def test_the_favourites_page_lists_and_removes_without_javascript(logged_in, profile, line):
    logged_in.post("/chat/favourite/c_00000000000000f1/", {"excerpt": "一只白鹭"})
    page = logged_in.get(f"/p/{profile.key}/favourites/")
    assert_csp_clean(page)
    html = page.content.decode()
    assert "一只白鹭" in html and f"#msg-{line.mid}" in html
    fav = Favourite.objects.get()
    done = logged_in.post(f"/p/{profile.key}/favourites/{fav.pk}/remove/", follow=True)
    assert "Removed from favourites" in done.content.decode()
    assert not Favourite.objects.exists()


def test_another_users_line_cannot_be_favourited(client, django_user_model, line):
    other = django_user_model.objects.create_user(username="bob", password="pw-bob-12345")
    client.force_login(other)
    assert client.post("/chat/favourite/c_00000000000000f1/").status_code == 404
