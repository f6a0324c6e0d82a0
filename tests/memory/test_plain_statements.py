"""The chat's hot reads and writes in plain SQL answer as the ORM query each one stands for
(BENCH §4: the ORM's query building cost 4-13 times these statements on every turn), on
SQLite and on PostgreSQL alike."""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from memory.models import Card, LoreEntry, Message, Profile, Slice
from tests.factories import CardFactory, MessageFactory, ProfileFactory

pytestmark = pytest.mark.django_db


def lease(profile):
    return Profile.objects.values_list("turn_until", flat=True).get(pk=profile.pk)


def test_the_turn_lease_is_taken_when_free_or_run_out_and_only_then():
    """S3: `take_turn` is `filter(Q(turn_until=None) | Q(turn_until__lt=now)).update(...)`."""
    profile, other = ProfileFactory(), ProfileFactory()
    now = timezone.now()
    assert Profile.objects.take_turn(profile.pk, now=now, until=now + timedelta(minutes=2))
    assert lease(profile) == now + timedelta(minutes=2)
    assert lease(other) is None  # only its own row
    assert not Profile.objects.take_turn(profile.pk, now=now + timedelta(minutes=1), until=now + timedelta(minutes=3))
    assert lease(profile) == now + timedelta(minutes=2)  # held: unchanged
    later = now + timedelta(minutes=2, microseconds=1)
    assert Profile.objects.take_turn(profile.pk, now=later, until=later + timedelta(minutes=2))  # run out
    assert lease(profile) == later + timedelta(minutes=2)


def test_a_held_lease_is_renewed_and_a_released_one_stays_free():
    profile = ProfileFactory()
    now = timezone.now()
    Profile.objects.renew_turn(profile.pk, until=now + timedelta(minutes=5))
    assert lease(profile) is None  # released: renewing does not take it
    Profile.objects.take_turn(profile.pk, now=now, until=now + timedelta(minutes=1))
    Profile.objects.renew_turn(profile.pk, until=now + timedelta(minutes=5))
    assert lease(profile) == now + timedelta(minutes=5)
    Profile.objects.release_turn(profile.pk)
    assert lease(profile) is None
    assert Profile.objects.take_turn(profile.pk, now=now, until=now + timedelta(minutes=1))


def test_the_card_version_is_the_live_cards():
    profile = ProfileFactory()
    assert Card.objects.version_of(profile.pk) is None  # no card yet
    CardFactory(profile=profile, version=7)
    CardFactory(profile=ProfileFactory(), version=3)
    assert Card.objects.version_of(profile.pk) == 7


def _entry(profile, position, **fields):
    return LoreEntry.objects.create(profile=profile, position=position, **{"content": "lore", **fields})


def test_lorebook_scan_keys_are_the_enabled_entries_with_content_as_the_orm_reads_them():
    profile = ProfileFactory()
    wanted = [
        _entry(profile, 0, keys=["猫", "cat 🐱"], secondary_keys=["vet"], selective=True),
        _entry(profile, 1, keys=[], constant=True, case_sensitive=True),
    ]
    _entry(profile, 2, keys=["off"], enabled=False)
    _entry(profile, 3, keys=["empty"], content="")
    _entry(ProfileFactory(), 0, keys=["someone else's"])
    orm = list(
        LoreEntry.objects.filter(profile_id=profile.pk, enabled=True).exclude(content="")
        .values_list("pk", "keys", "secondary_keys", "constant", "selective", "case_sensitive")
    )
    plain = LoreEntry.objects.scan_keys(profile.pk)
    assert sorted(plain) == sorted(orm)
    assert sorted(pk for pk, *_ in plain) == sorted(e.pk for e in wanted)
    assert LoreEntry.objects.scan_keys(ProfileFactory().pk) == []


def test_replies_to_lists_each_lines_replies_oldest_first():
    line = MessageFactory()
    other_line = MessageFactory(profile=line.profile, slice=line.slice)
    now = timezone.now()
    made = [
        MessageFactory(profile=line.profile, slice=line.slice, speaker=Message.Speaker.ASSISTANT, reply_of=line,
                       created_at=now + timedelta(seconds=s), mid=f"a_{1764900000000 + s}_{s:08x}")
        for s in (3, 1, 2)
    ]
    MessageFactory(profile=line.profile, slice=line.slice, speaker=Message.Speaker.ASSISTANT, reply_of=other_line,
                   mid="a_1764900000009_00000009")
    assert Message.objects.replies_to({line.pk}) == [(line.pk, m.mid) for m in sorted(made, key=lambda m: m.created_at)]
    assert {mid for _, mid in Message.objects.replies_to({line.pk, other_line.pk})} == {m.mid for m in made} | {"a_1764900000009_00000009"}
    assert Message.objects.replies_to(set()) == []



@pytest.mark.django_db(transaction=True)
def test_the_raw_reads_still_answer_after_a_migration_adds_a_column_to_their_table():
    """With statements prepared (memory.postgresql), a raw `SELECT *` that a server's connection
    prepared fails once another connection (a migration) adds a column to its table: "cached
    plan must not change result type". The raw reads name the model's own columns instead."""
    if connection.vendor != "postgresql" or not connection.settings_dict["OPTIONS"].get("server_side_binding"):
        pytest.skip("only a PostgreSQL connection that prepares statements")
    message = MessageFactory()

    def read():
        assert Message.objects.turns_before(message, limit=5) == []
        assert Slice.objects.newest_open(message.profile_id).pk == message.slice_id

    for _ in range(connection.connection.prepare_threshold + 1):
        read()
    db = connection.settings_dict
    with psycopg.connect(dbname=db["NAME"], host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"],
                         password=db["PASSWORD"], autocommit=True) as migration:
        try:
            for table in ("memory_slice", "memory_message"):
                migration.execute(f"ALTER TABLE {table} ADD COLUMN added_later integer")
            read()
        finally:
            for table in ("memory_slice", "memory_message"):
                migration.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS added_later")
