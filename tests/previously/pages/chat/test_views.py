"""The chat page (SPEC A1, A4 paging, L2 banner, P2, S1) through the Django test client."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memory.archive import archive_message
from memory.models import Message, Profile, Slice
from previously.llm import reset_provider
from previously.llm.offline import Offline
from tests.factories import MessageFactory, ProfileFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile(user):
    """The user's `owner` profile, in English (as in tests/previously/chat/)."""
    return ProfileFactory(user=user, key="owner", language="en")


def test_the_first_visit_makes_an_owner_profile_and_shows_the_chat(logged_in, user):
    page = logged_in.get(reverse("home")).content.decode()
    assert Profile.objects.for_user(user).get().key == "owner"
    assert 'ws-connect="/ws/chat/owner/"' in page and 'id="composer"' in page
    assert "static/previously/chat.js" in page and "<script>" not in page  # no inline script


def test_user_text_is_escaped_and_chinese_and_emoji_render(logged_in, profile):
    MessageFactory(profile=profile, content="<script>alert(1)</script> 你好 🐱")
    page = logged_in.get(reverse("home")).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; 你好 🐱" in page
    assert "<script>alert(1)" not in page


def test_the_page_shows_the_newest_lines_and_loads_older_pages_by_keyset(logged_in, profile):
    start = timezone.now() - timedelta(days=1)
    for i in range(75):
        MessageFactory(profile=profile, mid=f"c_{i:016x}", content=f"line {i:02d}", created_at=start + timedelta(minutes=i))
    page = logged_in.get(reverse("home")).content.decode()
    page = page[page.index('id="messages"'):]  # the lines, not the conversations panel (issue 17 point 7)
    assert "line 74" in page and "line 45" in page and "line 44" not in page
    assert page.index("line 45") < page.index("line 74")  # newest at the bottom
    older = logged_in.get(reverse("chat_older"), {"before": f"c_{45:016x}"}, headers={"HX-Request": "true"}).content.decode()
    assert "line 44" in older and "line 15" in older and "line 14" not in older and "line 45" not in older
    assert f"before=c_{15:016x}" in older
    last = logged_in.get(reverse("chat_older"), {"before": f"c_{15:016x}"}, headers={"HX-Request": "true"}).content.decode()
    assert "line 00" in last and "Load older" not in last


def test_load_older_without_javascript_is_a_plain_link(logged_in, profile):
    response = logged_in.get(reverse("chat_older"), {"before": "c_0000000000000001"})
    assert response.status_code == 302 and "before=c_0000000000000001" in response.url


def test_deleted_lines_are_not_shown(logged_in, profile):
    MessageFactory(profile=profile, content="gone line", deleted_at=timezone.now())
    assert "gone line" not in logged_in.get(reverse("home")).content.decode()


def test_another_users_lines_are_never_shown_p2(logged_in, profile):
    MessageFactory(profile=ProfileFactory(key="owner"), content="someone else's secret")
    assert "secret" not in logged_in.get(reverse("home")).content.decode()


def test_a_failed_reply_shows_its_mark_and_a_retry_after_a_reload_l3(logged_in, profile):
    user_line = MessageFactory(profile=profile, mid="c_00000000000000aa", content="hello")
    MessageFactory(profile=profile, slice=user_line.slice, mid="a_1700000000000_abcd", speaker="assistant", content="half a", status="failed")
    page = logged_in.get(reverse("home")).content.decode()
    assert "reply failed" in page and 'value="c_00000000000000aa"' in page and 'value="retry"' in page


def test_the_offline_banner_shows_when_no_model_is_configured_l2(logged_in, profile):
    reset_provider(Offline())
    try:
        page = logged_in.get(reverse("home")).content.decode()
    finally:
        reset_provider(None)
    assert 'id="offline-banner"' in page and "Offline mode" in page


def test_no_banner_with_a_model(logged_in, profile, llm_provider):
    assert 'id="offline-banner"' not in logged_in.get(reverse("home")).content.decode()


def test_new_conversation_closes_the_open_slice_so_the_next_line_opens_one_s1(logged_in, profile):
    first = archive_message(profile=profile, mid="c_0000000000000001", speaker="user", content="a").message
    response = logged_in.post(reverse("new_conversation"), headers={"HX-Request": "true"})
    assert 'hx-swap-oob="beforeend"' in response.content.decode()
    assert Slice.objects.get(pk=first.slice_id).close_reason == "new_conversation"
    second = archive_message(profile=profile, mid="c_0000000000000002", speaker="user", content="b").message
    assert second.slice_id != first.slice_id


def test_switching_profiles_keeps_the_choice_in_the_session(logged_in, user, profile):
    ProfileFactory(user=user, key="work", name="Work buddy")
    logged_in.post(reverse("chat_profile"), {"key": "work"})
    assert 'ws-connect="/ws/chat/work/"' in logged_in.get(reverse("home")).content.decode()


def test_switching_to_someone_elses_profile_does_nothing_p2(logged_in, user, profile):
    ProfileFactory(key="theirs")
    logged_in.post(reverse("chat_profile"), {"key": "theirs"})
    assert 'ws-connect="/ws/chat/owner/"' in logged_in.get(reverse("home")).content.decode()


def test_the_chat_needs_a_login(client):
    assert client.get(reverse("home")).status_code == 302
    assert Message.objects.count() == 0


@pytest.mark.parametrize("attachment", [
    {"path": "images/1/c_00000000000000f1.png"}, {}, {"mime": "image/png"}, None, [], "x", {"name": None},
])
@pytest.mark.django_db
def test_an_imported_image_record_of_any_shape_never_breaks_the_chat_page(client, profile, attachment):
    """Issue 24 point 9: an image record with a path and no `name` made the page a 500."""
    client.force_login(profile.user)
    archive_message(profile=profile, mid="c_00000000000000f1", speaker="user", content="", message_type="image",
                    attachment=attachment)
    response = client.get(reverse("home"))
    assert response.status_code == 200 and 'id="msg-c_00000000000000f1"' in response.content.decode()
