"""P1, P2: companions created, renamed, switched and deleted from the UI; nav everywhere."""

import pytest
from django.urls import reverse

from memory.archive import archive_message
from memory.models import Message, Profile, RecallDocument, Slice
from memory.recall.rank import rank_messages
from tests.factories import ExperienceFactory, HighlightFactory, ProfileFactory, UserFactory
from tests.previously.pages.conftest import assert_no_inline_script

pytestmark = pytest.mark.django_db


def test_the_profiles_page_lists_the_users_companions_only(logged_in, user, profile):
    ProfileFactory(user=user, key="work", name="Work buddy")
    ProfileFactory(key="theirs", name="Someone else's")
    html = logged_in.get(reverse("profiles")).content.decode()
    assert "Work buddy" in html and "owner" in html
    assert "Someone else" not in html
    assert_no_inline_script(html)


def test_creating_a_companion_makes_it_current(logged_in, user, profile):
    response = logged_in.post(
        reverse("profiles"), {"key": "coach", "name": "Coach", "persona": "I am a running coach.", "language": "en"}
    )
    assert response.status_code == 302
    coach = Profile.objects.get(user=user, key="coach")
    assert (coach.name, coach.persona, coach.language) == ("Coach", "I am a running coach.", "en")
    assert 'ws-connect="/ws/chat/coach/"' in logged_in.get(reverse("home")).content.decode()


@pytest.mark.parametrize("key", ["Bad Key", "x" * 33, "owner\n", "", "中文"])
def test_an_invalid_key_is_a_form_error_p1(logged_in, user, profile, key):
    response = logged_in.post(reverse("profiles"), {"key": key, "name": "", "persona": "", "language": "zh"})
    assert response.status_code == 400
    assert "errorlist" in response.content.decode()
    assert list(Profile.objects.for_user(user).values_list("key", flat=True)) == ["owner"]


def test_a_taken_key_is_a_form_error(logged_in, user, profile):
    response = logged_in.post(reverse("profiles"), {"key": "owner", "language": "zh"})
    assert response.status_code == 400
    assert "You already have a companion with this key." in response.content.decode()


def test_the_same_key_as_another_users_companion_is_fine(logged_in, user, profile):
    ProfileFactory(key="coach")
    assert logged_in.post(reverse("profiles"), {"key": "coach", "language": "zh"}).status_code == 302
    assert Profile.objects.filter(key="coach").count() == 2


def test_renaming_sets_name_persona_and_language_but_not_the_key(logged_in, user, profile):
    response = logged_in.post(
        reverse("profile_edit", args=["owner"]),
        {"key": "hacked", "name": "小安", "persona": "你是小安。", "language": "zh"},
    )
    assert response.status_code == 302
    profile.refresh_from_db()
    assert (profile.key, profile.name, profile.persona, profile.language) == ("owner", "小安", "你是小安。", "zh")


def test_the_persona_reaches_the_prompt(user, profile):
    from previously.chat.prompt import stable_prefix

    profile.persona = "You are Juniper, a patient gardener."
    profile.save()
    slice_ = archive_message(profile=profile, mid="c_00000000000000a1", speaker="user", content="hi").message.slice
    assert "Juniper, a patient gardener" in stable_prefix(profile=profile, slice_=slice_, card_text="")


def test_switching_from_a_page_returns_to_it_for_the_other_companion(logged_in, user, profile):
    ProfileFactory(user=user, key="work")
    response = logged_in.post(reverse("chat_profile"), {"key": "work", "next": "/p/owner/highlights/"})
    assert response.url == "/p/work/highlights/"
    assert logged_in.session["profile_key"] == "work"
    response = logged_in.post(reverse("chat_profile"), {"key": "owner", "next": "https://evil.example/"})
    assert response.url == reverse("home")


def test_switching_to_another_users_companion_is_404_and_changes_nothing(logged_in, user, profile):
    ProfileFactory(key="theirs")
    assert logged_in.post(reverse("chat_profile"), {"key": "theirs"}).status_code == 404
    assert logged_in.session.get("profile_key") in (None, "owner")


def test_another_users_companion_cannot_be_edited_or_deleted(logged_in, user, profile):
    theirs = ProfileFactory(key="theirs", name="Theirs")
    assert logged_in.get(reverse("profile_edit", args=["theirs"])).status_code == 404
    assert logged_in.post(reverse("profile_edit", args=["theirs"]), {"name": "mine now", "language": "en"}).status_code == 404
    assert logged_in.post(reverse("profile_delete", args=["theirs"]), {"confirm_key": "theirs"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.name == "Theirs"


def _stocked(profile):
    first = archive_message(profile=profile, mid="c_00000000000000b1", speaker="user", content="我们去海边散步吧 beach walk")
    archive_message(profile=profile, mid="a_1760000000000_bb2", speaker="assistant", content="好呀，海边见")
    HighlightFactory(profile=profile, message=first.message, content="海边散步")
    ExperienceFactory(profile=profile, title="Likes the sea")
    return first.message


def test_the_delete_page_says_what_will_go(logged_in, user, profile):
    _stocked(profile)
    html = logged_in.get(reverse("profile_delete", args=["owner"])).content.decode()
    assert "2 messages" in html and "1 highlight" in html and "1 experience" in html
    assert "This cannot be undone." in html
    assert_no_inline_script(html)


def test_deleting_needs_the_key_typed(logged_in, user, profile):
    _stocked(profile)
    response = logged_in.post(reverse("profile_delete", args=["owner"]), {"confirm_key": "ownr"})
    assert response.status_code == 400
    assert "nothing was deleted" in response.content.decode()
    assert Message.objects.filter(profile=profile).count() == 2


def test_deleting_removes_everything_of_the_companion_and_nothing_else(logged_in, user, profile):
    _stocked(profile)
    other = ProfileFactory(user=user, key="work")
    archive_message(profile=other, mid="c_00000000000000c1", speaker="user", content="beach volleyball at work")
    response = logged_in.post(reverse("profile_delete", args=["owner"]), {"confirm_key": "owner"})
    assert response.status_code == 302
    assert not Profile.objects.filter(pk=profile.pk).exists()
    assert not Message.objects.filter(profile_id=profile.pk).exists()
    assert not Slice.objects.filter(profile_id=profile.pk).exists()
    assert not RecallDocument.objects.filter(profile_id=profile.pk).exists()
    assert rank_messages(profile_id=profile.pk, query="beach", limit=5) == []
    assert [h.message_id for h in rank_messages(profile_id=other.pk, query="beach", limit=5)] == [
        Message.objects.get(profile=other).pk
    ]


def test_every_page_has_the_nav_with_the_current_companion(logged_in, user, profile):
    ProfileFactory(user=user, key="work", name="Work buddy")
    for name in ["home", "archive", "timeline", "beliefs", "profiles", "data", "about", "card"]:
        html = logged_in.get(reverse(name)).content.decode()
        for label in ["Chat", "Memory", "Timeline", "Previously On", "Profiles", "Data", "Log out"]:
            assert f">{label}<" in html, (name, label)
        assert '<option value="owner" selected>' in html, name
        assert '<option value="work">Work buddy</option>' in html, name
        assert ">Admin<" not in html
        assert_no_inline_script(html)


def test_staff_see_the_admin_link(client, profile, user):
    user.is_staff = True
    user.save()
    client.force_login(user)
    assert ">Admin<" in client.get(reverse("about")).content.decode()


def test_the_about_page_names_the_model_never_its_key(logged_in, profile):
    from previously.llm import reset_provider
    from previously.llm.openai_compat import OpenAICompatible

    reset_provider(OpenAICompatible(base_url="http://127.0.0.1:9/v1", api_key="sk-secret-123", model="qwen-max"))
    html = logged_in.get(reverse("about")).content.decode()
    assert "qwen-max" in html and "OpenAI-compatible at http://127.0.0.1:9/v1" in html
    assert "sk-secret-123" not in html
    assert "Offline mode" not in html


def test_the_about_page_states_offline_mode(logged_in, profile):
    html = logged_in.get(reverse("about")).content.decode()
    assert "Offline mode: no model is configured" in html


def test_the_pages_need_a_login(client):
    for name in ["archive", "timeline", "beliefs", "profiles", "about"]:
        response = client.get(reverse(name))
        assert response.status_code == 302 and reverse("login") in response.url, name
    assert client.post(reverse("profile_delete", args=["owner"]), {"confirm_key": "owner"}).status_code == 302


def test_another_users_page_lists_never_leak(client, profile):
    stranger = UserFactory()
    client.force_login(stranger)
    _stocked(profile)
    for name in ["archive", "timeline", "beliefs", "profiles"]:
        html = client.get(reverse(name), {"q": "散步"} if name == "archive" else {}).content.decode()
        assert "我们去海边散步吧" not in html and "海边散步" not in html, name
    response = client.get(reverse("archive"), {"profile": "owner", "q": "散步"})  # the stranger's own owner
    assert "我们去海边散步吧" not in response.content.decode()
