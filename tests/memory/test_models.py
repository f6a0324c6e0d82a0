"""Integrity lives in the database (issue 2): unique ids, enums, profile keys, tombstones."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.models import Experience, Message, Profile, Relation, Tombstone
from memory.models.archive import validate_profile_key
from tests.factories import (
    ExperienceFactory,
    HighlightFactory,
    MessageFactory,
    ProfileFactory,
    RelationFactory,
    TombstoneFactory,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("key", ["owner", "a", "test_2", "my-companion", "x" * 32])
def test_valid_profile_keys_pass_the_p1_regex(key):
    assert validate_profile_key(key) == key


@pytest.mark.parametrize("key", ["", "Owner", "has space", "x" * 33, "中文", "a/b", "owner\n"])
def test_invalid_profile_keys_are_refused_p1(key):
    with pytest.raises(ValidationError):
        validate_profile_key(key)


def test_database_refuses_a_profile_key_outside_the_regex(user):
    with pytest.raises(IntegrityError):
        Profile.objects.create(user=user, key="Bad Key")


def test_profile_key_defaults_to_owner(user):
    assert Profile.objects.create(user=user).key == "owner"


def test_two_users_may_each_have_an_owner_profile_but_one_user_not_twice(user):
    ProfileFactory(key="owner")
    Profile.objects.create(user=user, key="owner")
    with pytest.raises(IntegrityError):
        Profile.objects.create(user=user, key="owner")


def test_mid_is_unique_per_profile_not_globally():
    first = MessageFactory(mid="c_00000000000000aa")
    MessageFactory(mid="c_00000000000000aa")  # another profile
    with pytest.raises(IntegrityError):
        MessageFactory(mid="c_00000000000000aa", profile=first.profile, slice=first.slice)


def test_message_speaker_outside_the_enum_is_refused():
    with pytest.raises(IntegrityError):
        MessageFactory(speaker="robot")


def test_message_type_outside_the_enum_is_refused():
    with pytest.raises(IntegrityError):
        MessageFactory(message_type="video")


def test_live_excludes_soft_deleted_messages():
    kept = MessageFactory()
    MessageFactory(profile=kept.profile, slice=kept.slice, deleted_at=timezone.now())
    assert list(Message.objects.for_profile(kept.profile).live()) == [kept]


def test_experience_status_outside_the_enum_is_refused():
    with pytest.raises(IntegrityError):
        ExperienceFactory(status="maybe")


def test_valid_experiences_exclude_invalidated_deleted_and_flagged():
    profile = ProfileFactory()
    current = ExperienceFactory(profile=profile, status="active")
    ExperienceFactory(profile=profile, status="active", invalid_at=timezone.now())
    ExperienceFactory(profile=profile, status="active", deleted_at=timezone.now())
    ExperienceFactory(profile=profile, status="active", flagged="source message missing")
    candidate = ExperienceFactory(profile=profile, status="candidate")
    assert list(Experience.objects.for_profile(profile).active()) == [current]
    assert list(Experience.objects.for_profile(profile).candidates()) == [candidate]


def test_relation_type_must_be_one_of_the_five():
    assert set(Relation.Type.values) == {"related", "causes", "follows", "contradicts", "part_of"}
    with pytest.raises(IntegrityError):
        RelationFactory(type="loves")


def test_relation_with_an_unresolved_end_must_be_flagged():
    relation = RelationFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Relation.objects.filter(pk=relation.pk).update(to_experience=None)
    Relation.objects.filter(pk=relation.pk).update(to_experience=None, flagged="end missing")


def test_highlight_without_a_message_must_be_flagged():
    highlight = HighlightFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        type(highlight).objects.filter(pk=highlight.pk).update(message=None)


def test_tombstone_expires_400_days_after_deletion_by_default():
    deleted = timezone.now()
    tomb = TombstoneFactory(deleted_at=deleted)
    assert tomb.expires_at == deleted + timedelta(days=400)


def test_one_tombstone_per_record():
    tomb = TombstoneFactory(object_id="c_1111111111111111")
    with pytest.raises(IntegrityError):
        TombstoneFactory(profile=tomb.profile, kind="msg", object_id="c_1111111111111111")


def test_tombstones_in_force_exclude_expired_ones():
    profile = ProfileFactory()
    live = TombstoneFactory(profile=profile)
    TombstoneFactory(
        profile=profile,
        deleted_at=timezone.now() - timedelta(days=500),
        expires_at=timezone.now() - timedelta(days=100),
    )
    assert list(Tombstone.objects.for_profile(profile).in_force()) == [live]
