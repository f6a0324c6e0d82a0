"""Full import (SPEC X2): dedupe, tombstone blocking, dry run, re-run no-op, round trip."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from bench.synthetic import write_dump
from memory.curation import add_favourite
from memory.interop.export import export_json
from memory.interop.full_import import import_full
from memory.models import (
    Card,
    CardSnapshot,
    Experience,
    ExperienceHistory,
    Favourite,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    Message,
    Profile,
    Relation,
    Slice,
    Tombstone,
)
from tests.factories import ExperienceFactory, MessageFactory, ProfileFactory

pytestmark = pytest.mark.django_db

MODELS = (Message, LegacyFragment, Highlight, Experience, Relation, Tombstone, Slice)


def counts(profile_filter=None) -> dict:
    return {m.__name__: m.objects.filter(**(profile_filter or {})).count() for m in MODELS}


@pytest.fixture
def exported(admin, tmp_path):
    dump = tmp_path / "in.json"
    write_dump(str(dump), keys=500, seed=7)
    call_command("import_kv", str(dump), stdout=StringIO())
    return export_json(profiles=Profile.objects.filter(user=admin))


def test_x2_round_trip_into_another_user_recreates_everything(exported, admin, django_user_model):
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-1234")
    import_full(data=exported, user=bob)
    assert counts({"profile__user": bob}) == counts({"profile__user": admin})


def test_x2_rerunning_an_import_changes_nothing(exported, admin):
    before = counts()
    report = import_full(data=exported, user=admin)
    assert counts() == before
    assert report.counts["messages"]["created"] == 0
    assert report.counts["messages"]["existing"] == sum(len(p["messages"]) for p in exported["profiles"])


def test_x2_dry_run_previews_counts_and_writes_nothing(exported, django_user_model):
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-1234")
    report = import_full(data=exported, user=bob, dry_run=True)
    assert report.counts["messages"]["created"] > 0
    assert Message.objects.filter(profile__user=bob).count() == 0
    assert Profile.objects.filter(user=bob).count() == 0


def _export_of(profile) -> dict:
    return export_json(profiles=[profile])


def test_x2_tombstoned_message_in_the_target_is_skipped_and_reported(user, django_user_model):
    src = ProfileFactory(user=user, key="owner")
    MessageFactory(profile=src, mid="c_00000000000000aa", content="secret")
    data = _export_of(src)
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-1234")
    target = ProfileFactory(user=bob, key="owner")
    from tests.factories import TombstoneFactory

    TombstoneFactory(profile=target, kind="msg", object_id="c_00000000000000aa")
    report = import_full(data=data, user=bob)
    assert not Message.objects.filter(profile=target).exists()
    assert report.counts["messages"]["tombstoned"] == 1
    assert "c_00000000000000aa" in report.notes[0]


def test_x2_tombstone_in_the_file_is_imported_and_blocks_the_record_it_names(user, django_user_model):
    src = ProfileFactory(user=user, key="owner")
    MessageFactory(profile=src, mid="c_00000000000000bb", content="deleted later")
    data = _export_of(src)
    data["profiles"][0]["tombstones"].append({
        "kind": "msg", "object_id": "c_00000000000000bb", "deleted_at": "2026-01-01T00:00:00+00:00",
        "expires_at": "2027-02-05T00:00:00+00:00", "content_hash": "", "created_at": None,
        "legacy_key": "", "legacy_extra": {}})
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-1234")
    import_full(data=data, user=bob)
    assert Tombstone.objects.filter(profile__user=bob, object_id="c_00000000000000bb").exists()
    assert not Message.objects.filter(profile__user=bob).exists()


def test_x2_fragment_deduped_by_content_ts_fingerprint(exported, admin):
    frag = exported["profiles"][0]["legacy_fragments"][0]
    exported["profiles"][0]["legacy_fragments"].append({**frag, "key": frag["key"] + "_retry"})
    before = LegacyFragment.objects.count()
    import_full(data=exported, user=admin)
    assert LegacyFragment.objects.count() == before


def test_import_full_bad_file_exits_1(tmp_path, admin):
    from django.core.management.base import CommandError

    path = tmp_path / "x.json"
    path.write_text('{"format": "something-else"}')
    with pytest.raises(CommandError) as err:
        call_command("import_full", str(path), stdout=StringIO())
    assert err.value.returncode == 1


def test_import_full_command_dry_run_prints_counts(exported, tmp_path, django_user_model):
    django_user_model.objects.create_user(username="bob", password="pw-bob-1234")
    path = tmp_path / "e.json"
    path.write_text(json.dumps(exported, ensure_ascii=False))
    out = StringIO()
    call_command("import_full", str(path), "--dry-run", "--user", "bob", stdout=out)
    assert "dry run" in out.getvalue() and "messages" in out.getvalue()
    assert not Message.objects.filter(profile__user__username="bob").exists()


ALL_KINDS = (*MODELS, Card, CardSnapshot, ExperienceHistory, Favourite, LegacyMeta)


def every_kind(user) -> dict:
    owner_of = {ExperienceHistory: "experience__profile__user"}
    return {m.__name__: m.objects.filter(**{owner_of.get(m, "profile__user"): user}).count() for m in ALL_KINDS}


def test_x2_round_trip_keeps_every_kind_even_into_an_empty_card(admin, tmp_path, django_user_model):
    """Issue 15 point 7: cards, snapshots, experience history and favourites survive; a target
    profile whose card row is empty (opening /card/ makes one) takes the exported card."""
    dump = tmp_path / "in.json"
    write_dump(str(dump), keys=300, seed=11)
    call_command("import_kv", str(dump), stdout=StringIO())
    profile = Profile.objects.filter(user=admin).order_by("key").first()
    line = Message.objects.filter(profile=profile, deleted_at__isnull=True).exclude(content="").first()
    add_favourite(profile=profile, message=line)
    add_favourite(profile=profile, message=line, excerpt=line.content[:3])
    Card.objects.update_or_create(profile=profile, defaults={"text": "# Previously On\n\nlegacy card text\n"})
    a_slice = Slice.objects.filter(profile=profile).first()
    CardSnapshot.objects.create(profile=profile, slice=a_slice, text="card at the end", card_version=2)
    experience = Experience.objects.filter(profile=profile).first() or ExperienceFactory(profile=profile)
    experience.record(action="edit", before=experience.snapshot(), actor="user", reason="round trip")
    exported = export_json(profiles=Profile.objects.filter(user=admin))
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-1234")
    target = Profile.objects.create(user=bob, key=profile.key)
    Card.objects.create(profile=target, text="")  # what opening /card/ leaves

    import_full(data=exported, user=bob)

    expected, got = every_kind(admin), every_kind(bob)
    assert got == expected
    assert all(expected[k.__name__] for k in (Card, CardSnapshot, ExperienceHistory, Favourite))
    assert Card.objects.get(profile=target).text == "# Previously On\n\nlegacy card text\n"
    assert set(Favourite.objects.filter(profile=target).values_list("excerpt", flat=True)) == {"", line.content[:3]}


def test_a_fallback_profile_record_exports_under_the_profile_it_now_belongs_to(admin, tmp_path):
    from memory.interop.export import export_kv
    from tests.memory.interop.conftest import msg

    dump = tmp_path / "bad.json"
    dump.write_text(json.dumps([msg("Bad Profile!", "c_00000000000000d1", "user", "hey there", 1760968800000)]))
    call_command("import_kv", str(dump), stdout=StringIO())
    entries = list(export_kv(profiles=Profile.objects.filter(user=admin)))
    keys = [e["key"] for e in entries]
    assert "msg:owner:c_00000000000000d1" in keys and not any("Bad Profile!" in k for k in keys)
    value = json.loads(next(e["value"] for e in entries if e["key"] == "msg:owner:c_00000000000000d1"))
    assert value["profile_id"] == "owner"


def test_x2_export_import_export_keeps_exactly_what_the_file_says(admin, tmp_path, django_user_model):
    """Issue 25 point 2: export_full -> import_full into an empty account -> export gives the same
    file: no period derived where the file's is empty, and the file's created_at kept for card
    snapshots, favourites and experience history (not the import's time)."""
    dump = tmp_path / "in.json"
    write_dump(str(dump), keys=300, seed=11)
    call_command("import_kv", str(dump), stdout=StringIO())
    profile = Profile.objects.filter(user=admin).order_by("key").first()
    line = Message.objects.filter(profile=profile, deleted_at__isnull=True).exclude(content="").first()
    add_favourite(profile=profile, message=line)
    CardSnapshot.objects.create(profile=profile, slice=Slice.objects.filter(profile=profile).first(), text="card")
    experience = Experience.objects.filter(profile=profile).first() or ExperienceFactory(profile=profile)
    experience.record(action="edit", before=experience.snapshot(), actor="user", reason="round trip")
    old = "2020-01-02T03:04:05+00:00"
    Favourite.objects.filter(profile=profile).update(created_at=old)
    CardSnapshot.objects.filter(profile=profile).update(created_at=old)
    ExperienceHistory.objects.filter(experience__profile=profile).update(created_at=old)
    # A line with an empty period (as a migrated legacy archive has them).
    Message.objects.filter(pk=line.pk).update(period="", local_hour=14)
    other = Message.objects.filter(profile=profile).exclude(pk=line.pk).first()
    Message.objects.filter(pk=other.pk).update(period="深夜", local_hour=14)  # a legacy name, not an id
    exported = export_json(profiles=Profile.objects.filter(user=admin))
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-1234")

    import_full(data=exported, user=bob)

    again = export_json(profiles=Profile.objects.filter(user=bob))
    for before, after in zip(exported["profiles"], again["profiles"], strict=True):
        for kind in ("card_snapshots", "favourites", "experiences", "tombstones", "highlights", "relations"):
            assert after[kind] == before[kind], kind
        by_mid = {m["mid"]: m for m in after["messages"]}
        for m in before["messages"]:
            got = by_mid[m["mid"]]
            assert {k: got[k] for k in ("period", "local_hour", "local_day_key")} == \
                {k: m[k] for k in ("period", "local_hour", "local_day_key")}, m["mid"]
