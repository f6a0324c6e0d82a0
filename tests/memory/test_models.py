"""Integrity lives in the database (issue 2): unique ids, enums, profile keys, tombstones."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.deletion import hide_message
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


# --- plain-SQL reads on every turn, pinned to the querysets they stand for (BENCH §2) ---------


def test_turns_before_matches_the_live_complete_non_system_lines_of_the_slice():
    profile = ProfileFactory()
    t0 = timezone.now() - timedelta(hours=1)
    first = MessageFactory(profile=profile, created_at=t0)
    slice_ = first.slice
    lines = [first] + [
        MessageFactory(profile=profile, slice=slice_, created_at=t0 + timedelta(seconds=n), content=f"line {n}")
        for n in range(1, 8)
    ]
    Message.objects.filter(pk=lines[2].pk).update(status=Message.Status.FAILED)
    Message.objects.filter(pk=lines[3].pk).update(message_type=Message.Type.SYSTEM)
    Message.objects.filter(pk=lines[4].pk).update(deleted_at=timezone.now())
    MessageFactory(profile=profile, created_at=t0 + timedelta(seconds=3))  # another slice
    current = lines[6]
    MessageFactory(profile=profile, slice=slice_, created_at=t0 + timedelta(seconds=9))  # later
    got = Message.objects.turns_before(current, limit=3)
    expected = list(
        Message.objects.live().in_slice(slice_)
        .filter(status=Message.Status.COMPLETE, created_at__lte=current.created_at)
        .exclude(pk=current.pk).exclude(message_type=Message.Type.SYSTEM)
        .order_by("-created_at", "-id")[:3]
    )
    assert [m.pk for m in got] == [m.pk for m in expected] == [lines[5].pk, lines[1].pk, lines[0].pk]
    assert [m.content for m in got] == [m.content for m in expected]
    assert got[0].created_at == expected[0].created_at


def test_live_among_matches_for_profile_live_without_system_lines_and_defers_columns():
    profile, other = ProfileFactory(), ProfileFactory()
    kept = MessageFactory(profile=profile, content="kept", raw_content="[[fav:x]] kept")
    hidden = MessageFactory(profile=profile, deleted_at=timezone.now())
    system = MessageFactory(profile=profile, message_type=Message.Type.SYSTEM)
    elsewhere = MessageFactory(profile=other)
    ids = [kept.pk, hidden.pk, system.pk, elsewhere.pk]
    got = Message.objects.live_among(profile.pk, ids, defer=("raw_content",))
    expected = Message.objects.for_profile(profile).live().exclude(message_type=Message.Type.SYSTEM).filter(pk__in=ids)
    assert sorted(m.pk for m in got) == sorted(m.pk for m in expected) == [kept.pk]
    assert "raw_content" in got[0].get_deferred_fields()
    assert (got[0].content, got[0].raw_content) == ("kept", "[[fav:x]] kept")  # loads on access


def test_reread_copies_the_profile_with_its_stored_prompt_fields():
    profile = ProfileFactory(name="Mo", persona="You are Mo.", language="en")
    Profile.objects.filter(pk=profile.pk).update(name="小莫", persona="你是小莫。", language="zh")
    fresh = Profile.objects.reread(profile)
    stored = Profile.objects.get(pk=profile.pk)
    assert (fresh.name, fresh.persona, fresh.language) == (stored.name, stored.persona, stored.language)
    assert (profile.name, fresh.pk, fresh.key) == ("Mo", profile.pk, profile.key)
    Profile.objects.filter(pk=profile.pk).delete()
    with pytest.raises(Profile.DoesNotExist):
        Profile.objects.reread(profile)


# --- keyset paging: "older/newer than this line" -----------------------------------------------


def _five_lines():
    profile = ProfileFactory()
    t0 = timezone.now() - timedelta(hours=1)
    same = t0 + timedelta(seconds=2)
    lines = [
        MessageFactory(profile=profile, created_at=at, content=f"line {i}")
        for i, at in enumerate([t0, t0 + timedelta(seconds=1), same, same, t0 + timedelta(seconds=3)])
    ]
    return profile, lines


def test_page_from_gives_the_older_lines_newest_first_breaking_time_ties_by_id():
    profile, lines = _five_lines()
    older = Message.objects.for_profile(profile).page_from(lines[3].mid)
    assert [m.pk for m in older] == [lines[2].pk, lines[1].pk, lines[0].pk]


def test_page_from_gives_the_newer_lines_oldest_first():
    profile, lines = _five_lines()
    newer = Message.objects.for_profile(profile).page_from(lines[2].mid, newer=True)
    assert [m.pk for m in newer] == [lines[3].pk, lines[4].pk]


def test_page_from_without_a_line_gives_them_all_and_an_unknown_line_none():
    profile, lines = _five_lines()
    mine = Message.objects.for_profile(profile)
    assert [m.pk for m in mine.page_from("")] == [m.pk for m in reversed(lines)]
    assert list(mine.page_from("c_ffffffffffffffff")) == []


def test_page_from_may_look_for_its_line_beyond_the_lines_it_pages():
    profile, lines = _five_lines()
    hide_message(lines[3])
    live = Message.objects.for_profile(profile).live()
    assert list(live.page_from(lines[3].mid)) == []
    anchored = live.page_from(lines[3].mid, anchors=Message.objects.for_profile(profile))
    assert [m.pk for m in anchored] == [lines[2].pk, lines[1].pk, lines[0].pk]
