"""delete_message, purge_soft_deleted, prune_tombstones: thin commands over memory.deletion (D1-D5)."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from memory.curation import add_favourite
from memory.models import Message, Tombstone
from tests.factories import MessageFactory, ProfileFactory, TombstoneFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def boss(db):
    return UserFactory(username="boss", is_superuser=True, is_staff=True)


def run(*args):
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_delete_message_hides_by_default(profile):
    MessageFactory(profile=profile, mid="c_0000000000000001")
    output = run("delete_message", "--profile", "owner", "--mid", "c_0000000000000001", "--user", "alice")
    assert "hidden" in output and Message.objects.get().deleted_at is not None


def test_delete_message_defaults_to_the_first_superuser(boss):
    MessageFactory(profile=ProfileFactory(user=boss, key="owner"), mid="c_0000000000000001")
    output = run("delete_message", "--profile", "owner", "--mid", "c_0000000000000001", "--hard")
    assert "deleted" in output and not Message.objects.exists()


def test_delete_message_exits_3_listing_refs_when_referenced(profile):
    message = MessageFactory(profile=profile, mid="c_0000000000000001", content="hi")
    highlight = add_favourite(profile=profile, message=message).highlight
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("delete_message", "--profile", "owner", "--mid", message.mid, "--user", "alice",
                     "--hard", stderr=err)
    assert exited.value.code == 3 and highlight.hid in err.getvalue()
    assert Message.objects.exists()


def test_delete_message_with_force_cascades(profile):
    message = MessageFactory(profile=profile, mid="c_0000000000000001", content="hi")
    add_favourite(profile=profile, message=message)
    output = run("delete_message", "--profile", "owner", "--mid", message.mid, "--user", "alice", "--hard", "--force")
    assert "tombstone hl" in output and not Message.objects.exists()


def test_delete_message_again_answers_already_gone(profile):
    MessageFactory(profile=profile, mid="c_0000000000000001")
    run("delete_message", "--profile", "owner", "--mid", "c_0000000000000001", "--user", "alice", "--hard")
    output = run("delete_message", "--profile", "owner", "--mid", "c_0000000000000001", "--user", "alice", "--hard")
    assert "already_gone" in output


def test_delete_message_of_an_unknown_mid_is_an_error(profile):
    with pytest.raises(CommandError, match="not found"):
        run("delete_message", "--profile", "owner", "--mid", "c_ffffffffffffffff", "--user", "alice")


def test_delete_message_of_an_unknown_profile_is_an_error(profile):
    with pytest.raises(CommandError, match="no profile"):
        run("delete_message", "--profile", "nope", "--mid", "c_1", "--user", "alice")


def test_purge_dry_run_prints_counts_and_writes_nothing(profile):
    MessageFactory(profile=profile, deleted_at=timezone.now())
    output = run("purge_soft_deleted", "--dry-run")
    assert "DRY RUN" in output and "message" in output
    assert Message.objects.count() == 1 and not Tombstone.objects.exists()


def test_purge_deletes_and_reports_tombstones(profile):
    MessageFactory(profile=profile, deleted_at=timezone.now())
    MessageFactory(profile=profile, deleted_at=timezone.now())
    output = run("purge_soft_deleted", "--profile", "owner", "--user", "alice", "--batch", "1")
    assert "message: 2/2" in output and not Message.objects.exists()
    assert Tombstone.objects.filter(kind="msg").count() == 2


def test_purge_rejects_a_bad_date(profile):
    with pytest.raises(CommandError, match="--before"):
        run("purge_soft_deleted", "--before", "yesterday")


def test_prune_tombstones_removes_expired_ones(profile):
    TombstoneFactory(profile=profile, deleted_at=timezone.now() - timedelta(days=401))
    assert "removed 1" in run("prune_tombstones")
    assert not Tombstone.objects.exists()


def test_prune_tombstones_dry_run_keeps_them(profile):
    TombstoneFactory(profile=profile, deleted_at=timezone.now() - timedelta(days=401))
    assert "would remove 1" in run("prune_tombstones", "--dry-run")
    assert Tombstone.objects.count() == 1
