"""Admin review (C3, O1) and soft-delete cleanup (D4) actions, through the admin client."""

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse
from django.utils import timezone

from memory.models import Experience, Message, Tombstone
from tests.factories import ExperienceFactory, HighlightFactory, MessageFactory

pytestmark = pytest.mark.django_db


def act(client, model, action, objs, **extra):
    url = reverse(f"admin:memory_{model}_changelist")
    return client.post(url, {"action": action, ACTION_CHECKBOX_NAME: [o.pk for o in objs], **extra}, follow=True)


def test_admin_confirms_candidates_in_bulk_with_admin_history(admin_client, admin_user, profile):
    a, b = ExperienceFactory(profile=profile), ExperienceFactory(profile=profile)
    response = act(admin_client, "experience", "confirm_experiences", [a, b])
    assert "Confirmed 2 experience(s)." in response.content.decode()
    assert set(Experience.objects.active()) == {a, b}
    row = a.history.get()
    assert (row.actor, row.actor_user, row.action) == ("admin", admin_user, "confirm")


def test_admin_rejects_candidates_in_bulk(admin_client, profile):
    a = ExperienceFactory(profile=profile)
    act(admin_client, "experience", "reject_experiences", [a])
    a.refresh_from_db()
    assert a.status == "rejected" and a.history.get().actor == "admin"


def test_purge_action_first_shows_a_dry_run_count(admin_client, profile):
    hidden = MessageFactory(profile=profile, deleted_at=timezone.now())
    live = MessageFactory(profile=profile)
    response = act(admin_client, "message", "purge_soft_deleted", [hidden, live])
    body = response.content.decode()
    assert "Dry run" in body and "1 are soft-deleted" in body and "Yes, purge 1 row(s)" in body
    assert Message.objects.count() == 2 and not Tombstone.objects.exists()


def test_purge_action_lists_references_that_would_cascade(admin_client, profile):
    hidden = MessageFactory(profile=profile, deleted_at=timezone.now(), content="hi")
    highlight = HighlightFactory(message=hidden)
    body = act(admin_client, "message", "purge_soft_deleted", [hidden]).content.decode()
    assert highlight.hid in body


def test_confirmed_purge_deletes_with_tombstones_and_reports(admin_client, profile):
    hidden = MessageFactory(profile=profile, deleted_at=timezone.now())
    live = MessageFactory(profile=profile)
    response = act(admin_client, "message", "purge_soft_deleted", [hidden, live], post="yes")
    assert "Tombstones written — message: 1" in response.content.decode()
    assert list(Message.objects.all()) == [live]
    assert Tombstone.objects.get().object_id == hidden.mid


def test_keep_action_restores_soft_deleted_highlights(admin_client, profile):
    highlight = HighlightFactory(message=MessageFactory(profile=profile), deleted_at=timezone.now())
    act(admin_client, "highlight", "restore_soft_deleted", [highlight])
    highlight.refresh_from_db()
    assert highlight.deleted_at is None
