"""Curation pages and actions through the test client (C1-C7, D1-D2, P2)."""

import json

import pytest
from django.urls import reverse

from memory.curation import add_favourite, link, propose_experience
from memory.deletion import hide_message
from memory.models import Experience, Favourite, Highlight, Message, Relation, Tombstone
from tests.factories import (
    ExperienceFactory,
    HighlightFactory,
    MessageFactory,
    ProfileFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def url(name, *args):
    return reverse(f"curation:{name}", args=["owner", *args])


# --- favourite (C1, C2) ---


def test_favouriting_a_part_by_htmx_answers_the_actions_fragment(signed_in, profile):
    message = MessageFactory(profile=profile, content="今天去海边散步了🌊")
    response = signed_in.post(url("favourite", message.mid), {"excerpt": "海边散步了🌊"}, **HX)
    assert response.status_code == 200 and "Saved to favourites" in response.content.decode()
    assert "favourited" in response["HX-Trigger"]
    assert Highlight.objects.get().content == "海边散步了🌊"


def test_a_non_verbatim_favourite_shows_the_reason(signed_in, profile):
    message = MessageFactory(profile=profile, content="今天去海边散步了")
    response = signed_in.post(url("favourite", message.mid), {"excerpt": "去了海边"}, **HX)
    assert "does not occur verbatim" in response.content.decode()
    assert not Favourite.objects.exists()


def test_favouriting_without_javascript_redirects_back_with_a_notice(signed_in, profile):
    message = MessageFactory(profile=profile, content="hello")
    response = signed_in.post(url("favourite", message.mid), {"next": url("messages")}, follow=True)
    assert response.redirect_chain[-1][0] == url("messages")
    assert "Saved to favourites" in response.content.decode()


def test_favourite_needs_a_post(signed_in, profile):
    message = MessageFactory(profile=profile)
    assert signed_in.get(url("favourite", message.mid)).status_code == 405


# --- hide and delete (D1, D2) ---


def test_the_messages_page_lists_messages_with_labelled_actions(signed_in, profile):
    message = MessageFactory(profile=profile, content="早上好 ☀️")
    body = signed_in.get(url("messages")).content.decode()
    assert "早上好 ☀️" in body and f'aria-label="Hide {message.mid}"' in body
    assert 'name="csrfmiddlewaretoken"' in body and "x-csrftoken" in body


def test_hiding_a_message_flags_it_and_offers_unhide(signed_in, profile):
    message = MessageFactory(profile=profile)
    response = signed_in.post(url("hide", message.mid), **HX)
    message.refresh_from_db()
    assert message.deleted_at is not None and "Unhide" in response.content.decode()


def test_unhiding_a_message_clears_the_flag(signed_in, profile):
    message = MessageFactory(profile=profile)
    hide_message(message)
    signed_in.post(url("unhide", message.mid))
    message.refresh_from_db()
    assert message.deleted_at is None


def test_deleting_a_referenced_message_asks_first_listing_the_refs(signed_in, profile):
    message = MessageFactory(profile=profile, content="hello")
    highlight = add_favourite(profile=profile, message=message).highlight
    response = signed_in.post(url("delete", message.mid))
    assert response.status_code == 409 and highlight.content in response.content.decode()
    assert Message.objects.exists()


def test_confirming_the_delete_cascades(signed_in, profile):
    message = MessageFactory(profile=profile, content="hello")
    add_favourite(profile=profile, message=message)
    response = signed_in.post(url("delete", message.mid), {"force": "1"}, **HX)
    assert "Deleted for good" in response.content.decode() and "message-deleted" in response["HX-Trigger"]
    assert not Message.objects.exists() and Tombstone.objects.filter(kind="hl").exists()


def test_the_api_answers_409_has_refs_as_json(signed_in, profile):
    message = MessageFactory(profile=profile, content="hello")
    highlight = add_favourite(profile=profile, message=message).highlight
    response = signed_in.post(url("api_delete", message.mid), json.dumps({"mode": "hard"}), content_type="application/json")
    assert response.status_code == 409
    assert response.json()["error"] == "has_refs"
    assert {"kind": "hl", "id": highlight.hid} in [{"kind": r["kind"], "id": r["id"]} for r in response.json()["refs"]]


def test_the_api_deletes_with_force_and_then_answers_already_gone(signed_in, profile):
    message = MessageFactory(profile=profile, content="hello")
    add_favourite(profile=profile, message=message)
    body = json.dumps({"mode": "hard", "force": True})
    first = signed_in.post(url("api_delete", message.mid), body, content_type="application/json")
    again = signed_in.post(url("api_delete", message.mid), body, content_type="application/json")
    assert first.json()["status"] == "deleted" and again.json()["already_gone"] is True


def test_the_api_refuses_an_invalid_profile_key(signed_in, profile):
    response = signed_in.post(reverse("curation:api_delete", args=["Bad Key", "c_1"]), "{}", content_type="application/json")
    assert response.status_code == 400


def test_the_api_without_csrf_token_is_forbidden(user, profile):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    message = MessageFactory(profile=profile)
    response = client.post(url("api_delete", message.mid), "{}", content_type="application/json")
    assert response.status_code == 403 and Message.objects.exists()


# --- highlights (C7) ---


def test_deleting_a_highlight_keeps_its_message_and_hides_its_relations(signed_in, profile):
    message = MessageFactory(profile=profile, content="hello")
    highlight = add_favourite(profile=profile, message=message).highlight
    relation = link(profile=profile, from_item=highlight, to_item=ExperienceFactory(profile=profile), type="related")
    signed_in.post(url("highlight_delete", highlight.hid))
    relation.refresh_from_db()
    assert Message.objects.live().exists() and relation.deleted_at is not None
    assert "hello" not in signed_in.get(url("highlights")).content.decode()


# --- experiences (C3-C5) ---


def test_the_review_page_shows_candidates_and_their_history(signed_in, profile):
    message = MessageFactory(profile=profile)
    propose_experience(profile=profile, title="搬去柏林 🇩🇪", content="五月", source_mids=[message.mid])
    body = signed_in.get(url("experiences")).content.decode()
    assert "搬去柏林 🇩🇪" in body and "To review (1)" in body and "<strong>create</strong> by agent" in body


def test_the_user_confirms_a_candidate(signed_in, user, profile):
    experience = ExperienceFactory(profile=profile, status="candidate")
    response = signed_in.post(url("experience_action", experience.eid, "confirm"), **HX)
    experience.refresh_from_db()
    assert experience.status == "active" and experience.history.get().actor_user == user
    assert "confirmed" in response.content.decode()


def test_the_user_invalidates_a_fact_that_stopped_being_true(signed_in, profile):
    experience = ExperienceFactory(profile=profile, status="active")
    signed_in.post(url("experience_action", experience.eid, "invalidate"))
    assert not Experience.objects.active().exists()
    assert "no longer true since" in signed_in.get(url("experiences")).content.decode()


def test_an_unknown_experience_action_is_404(signed_in, profile):
    experience = ExperienceFactory(profile=profile)
    assert signed_in.post(url("experience_action", experience.eid, "explode")).status_code == 404


def test_the_user_writes_down_an_experience(signed_in, profile):
    message = MessageFactory(profile=profile)
    data = {"title": "Got a cat", "content": "A grey one 🐱", "source_mids": message.mid,
            "time_certainty": "approximate", "confirm": "on"}
    signed_in.post(url("experiences"), data)
    experience = Experience.objects.get()
    assert (experience.status, experience.source_mids, experience.history.get().actor) == ("active", [message.mid], "user")


def test_a_missing_source_is_shown_on_the_form(signed_in, profile):
    data = {"title": "t", "content": "c", "source_mids": "c_ffffffffffffffff", "time_certainty": "unknown"}
    response = signed_in.post(url("experiences"), data)
    assert "c_ffffffffffffffff" in response.content.decode() and not Experience.objects.exists()


def test_editing_keeps_the_old_version_in_history(signed_in, profile):
    experience = ExperienceFactory(profile=profile, title="Lives in Paris")
    data = {"title": "Lives in Lyon", "content": experience.content, "time_certainty": "unknown", "reason": "moved"}
    signed_in.post(url("experience_edit", experience.eid), data)
    row = experience.history.get()
    assert (row.before["title"], row.after["title"], row.reason) == ("Lives in Paris", "Lives in Lyon", "moved")


def test_merging_from_the_edit_page(signed_in, profile):
    survivor, other = ExperienceFactory(profile=profile), ExperienceFactory(profile=profile)
    signed_in.post(url("experience_merge", survivor.eid), {"other": other.eid})
    other.refresh_from_db()
    assert other.invalid_at is not None and other.history.get().after["merged_into"] == survivor.eid


# --- relations (C6) ---


def test_the_user_links_two_memories_and_sees_them_grouped_with_arrows(signed_in, profile):
    highlight = HighlightFactory(message=MessageFactory(profile=profile, content="我很开心"))
    experience = ExperienceFactory(profile=profile, title="Got a cat")
    signed_in.post(url("relations"), {"from_id": highlight.hid, "type": "causes", "to_id": experience.eid})
    body = signed_in.get(url("relations")).content.decode()
    assert Relation.objects.get().type == "causes"
    assert "“我很开心”" in body and "→" in body and "Got a cat" in body and "<svg" in body


def test_relating_an_item_to_itself_is_refused(signed_in, profile):
    experience = ExperienceFactory(profile=profile)
    response = signed_in.post(url("relations"), {"from_id": experience.eid, "type": "related", "to_id": experience.eid})
    assert "cannot be related to itself" in response.content.decode()


def test_removing_a_relation_soft_deletes_it(signed_in, profile):
    a, b = ExperienceFactory(profile=profile), ExperienceFactory(profile=profile)
    relation = link(profile=profile, from_item=a, to_item=b, type="follows")
    signed_in.post(url("relation_delete", relation.rid))
    relation.refresh_from_db()
    assert relation.deleted_at is not None


# --- login and isolation (P2) ---


@pytest.mark.parametrize("name", ["messages", "highlights", "experiences", "relations"])
def test_pages_require_login(client, profile, name):
    response = client.get(url(name))
    assert response.status_code == 302 and reverse("login") in response.url


@pytest.mark.parametrize("name", ["messages", "highlights", "experiences", "relations"])
def test_another_users_profile_is_404(client, profile, name):
    client.force_login(UserFactory())
    assert client.get(url(name)).status_code == 404


def test_another_users_message_cannot_be_deleted_hidden_or_favourited(signed_in, profile):
    theirs = MessageFactory(profile=ProfileFactory(user=UserFactory(), key="owner"), content="theirs")
    for name in ("hide", "delete", "favourite"):
        assert signed_in.post(url(name, theirs.mid)).status_code == 404
    api = signed_in.post(url("api_delete", theirs.mid), "{}", content_type="application/json")
    assert api.status_code == 404
    assert Message.objects.live().filter(pk=theirs.pk).exists() and not Highlight.objects.exists()


def test_another_users_experience_cannot_be_confirmed(signed_in, profile):
    theirs = ExperienceFactory(profile=ProfileFactory(user=UserFactory(), key="owner"))
    assert signed_in.post(url("experience_action", theirs.eid, "confirm")).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "candidate"


def test_another_users_relation_cannot_be_removed(signed_in, profile):
    other = ProfileFactory(user=UserFactory(), key="owner")
    relation = link(profile=other, from_item=ExperienceFactory(profile=other), to_item=ExperienceFactory(profile=other), type="related")
    assert signed_in.post(url("relation_delete", relation.rid)).status_code == 404


def test_another_users_items_cannot_be_linked(signed_in, profile):
    theirs = ExperienceFactory(profile=ProfileFactory(user=UserFactory(), key="owner"))
    mine = ExperienceFactory(profile=profile)
    response = signed_in.post(url("relations"), {"from_id": mine.eid, "type": "related", "to_id": theirs.eid})
    assert response.status_code == 200 and not Relation.objects.exists()
