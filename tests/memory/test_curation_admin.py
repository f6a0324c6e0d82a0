"""Admin review (C3, O1) and soft-delete cleanup (D4) actions, through the admin client."""

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from memory.archive import MidTombstoned, archive_message
from memory.models import Experience, Message, RecallDocument, Tombstone
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


def test_keep_action_keeps_historic_soft_deletes_deleted_and_marks_them_reviewed(admin_client, profile):
    hidden = MessageFactory(profile=profile, deleted_at=timezone.now(), content="an old hidden line")
    response = act(admin_client, "message", "keep_soft_deleted", [hidden])
    assert "Kept 1 row(s) deleted and marked them reviewed." in response.content.decode()
    hidden.refresh_from_db()
    assert hidden.deleted_at is not None and hidden.reviewed_at is not None
    assert not RecallDocument.objects.filter(message=hidden).exists()
    unreviewed = admin_client.get(reverse("admin:memory_message_changelist") + "?deleted=unreviewed").content.decode()
    assert hidden.mid not in unreviewed


def test_restore_is_a_separate_action_with_its_own_confirmation_and_report(admin_client, profile):
    highlight = HighlightFactory(message=MessageFactory(profile=profile), deleted_at=timezone.now())
    page = act(admin_client, "highlight", "restore_soft_deleted", [highlight]).content.decode()
    assert "would become live again" in page and "Yes, restore 1 row(s)" in page
    highlight.refresh_from_db()
    assert highlight.deleted_at is not None
    done = act(admin_client, "highlight", "restore_soft_deleted", [highlight], post="yes").content.decode()
    assert "Restored 1 row(s): they are live again and back in recall." in done
    highlight.refresh_from_db()
    assert highlight.deleted_at is None


def test_the_admin_delete_view_goes_through_memory_deletion(admin_client, profile):
    message = archive_message(profile=profile, mid="c_00000000000000aa", speaker="user", content="delete me via admin 🙂").message
    HighlightFactory(message=message, content="delete me")
    url = reverse("admin:memory_message_delete", args=[message.pk])
    admin_client.post(url, {"post": "yes"}, follow=True)
    assert not Message.objects.filter(pk=message.pk).exists()
    assert Tombstone.objects.filter(kind="msg", object_id=message.mid).exists()
    assert Tombstone.objects.filter(kind="hl").exists()
    assert not RecallDocument.objects.filter(profile=profile).exists()
    with pytest.raises(MidTombstoned):
        archive_message(profile=profile, mid=message.mid, speaker="user", content="delete me via admin 🙂")
    assert LogEntry.objects.count() == 1
    assert "delete me" not in str(list(LogEntry.objects.values_list("object_repr", "change_message")))


def test_the_admin_bulk_delete_goes_through_memory_deletion(admin_client, profile):
    a = archive_message(profile=profile, mid="c_00000000000000ab", speaker="user", content="first line to go").message
    b = archive_message(profile=profile, mid="c_00000000000000ac", speaker="user", content="second line to go").message
    act(admin_client, "message", "delete_selected", [a, b], post="yes")
    assert "to go" not in str(list(LogEntry.objects.values_list("object_repr", flat=True)))
    assert not Message.objects.filter(profile=profile).exists()
    assert set(Tombstone.objects.values_list("object_id", flat=True)) == {a.mid, b.mid}
    assert not RecallDocument.objects.exists()


def test_archived_content_is_read_only_in_the_admin(admin_client, profile):
    message = MessageFactory(profile=profile, content="as it was said")
    url = reverse("admin:memory_message_change", args=[message.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="content"' not in page and "as it was said" in page
    admin_client.post(url, {"content": "rewritten"})
    message.refresh_from_db()
    assert message.content == "as it was said"
    assert admin_client.get(reverse("admin:memory_message_add")).status_code == 403
    tomb = Tombstone.objects.create(profile=profile, kind="msg", object_id="c_1", deleted_at=timezone.now(),
                                    expires_at=timezone.now())
    assert admin_client.post(reverse("admin:memory_tombstone_delete", args=[tomb.pk]), {"post": "yes"}).status_code == 403
