"""Hide, delete for good, purge and prune (SPEC D1-D5, D3)."""

import json
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from memory.archive import archive_message
from memory.curation import add_favourite, link, propose_experience
from memory.deletion import (
    HasRefs,
    MessageNotFound,
    delete_message,
    hard_delete_message,
    hide_message,
    message_refs,
    prune_tombstones,
    purge_soft_deleted,
    restore_records,
    unhide_message,
)
from memory.models import (
    Experience,
    Favourite,
    Highlight,
    Message,
    RecallDocument,
    Relation,
    Tombstone,
)
from memory.recall.index import search
from memory.recall.tokenize import tokenize
from tests.factories import ExperienceFactory, RelationFactory, TombstoneFactory

pytestmark = pytest.mark.django_db


def say(profile, mid, text):
    return archive_message(profile=profile, mid=mid, speaker="user", content=text).message


def found(profile, text):
    return [h.message_id for h in search(profile_id=profile.pk, tokens=tokenize(text), limit=10)]


# --- hide ---


def test_hiding_a_message_removes_it_from_recall(profile):
    message = say(profile, "c_0000000000000001", "我们去看海吧")
    hide_message(message)
    assert found(profile, "看海") == []
    assert Message.objects.get(pk=message.pk).deleted_at is not None


def test_unhiding_puts_a_message_back_into_recall(profile):
    message = say(profile, "c_0000000000000001", "我们去看海吧")
    hide_message(message)
    unhide_message(message)
    assert found(profile, "看海") == [message.pk]


def test_hiding_twice_answers_already_hidden(profile):
    say(profile, "c_0000000000000001", "hello")
    delete_message(profile=profile, mid="c_0000000000000001")
    assert delete_message(profile=profile, mid="c_0000000000000001").status == "already_hidden"


# --- hard delete (D1, D2, D3) ---


def test_an_unreferenced_message_is_deleted_for_good_with_a_tombstone(profile):
    message = say(profile, "c_0000000000000001", "secret 秘密")
    result = hard_delete_message(message)
    tomb = Tombstone.objects.get()
    assert result.status == "deleted" and result.tombstones == [("msg", message.mid)]
    assert (tomb.kind, tomb.object_id, tomb.content_hash) == ("msg", message.mid, message.content_hash)
    assert tomb.created_at == message.created_at
    assert tomb.expires_at - tomb.deleted_at == timedelta(days=400)


def test_after_a_hard_delete_recall_finds_nothing(profile):
    message = say(profile, "c_0000000000000001", "secret 秘密")
    hard_delete_message(message)
    assert found(profile, "secret 秘密") == []
    assert not RecallDocument.objects.exists()


def test_the_tombstone_ttl_follows_the_setting(profile, settings):
    settings.PREVIOUSLY_TOMBSTONE_TTL_DAYS = 30
    hard_delete_message(say(profile, "c_0000000000000001", "x"))
    tomb = Tombstone.objects.get()
    assert tomb.expires_at - tomb.deleted_at == timedelta(days=30)


def test_a_referenced_message_is_refused_with_its_refs(profile):
    message = say(profile, "c_0000000000000001", "hello world")
    favourite = add_favourite(profile=profile, message=message, excerpt="world")
    with pytest.raises(HasRefs) as refused:
        hard_delete_message(message)
    refs = {(r["kind"], r["id"]) for r in refused.value.refs}
    assert refs == {("hl", favourite.highlight.hid), ("fav", str(favourite.pk))}
    assert Message.objects.filter(pk=message.pk).exists() and not Tombstone.objects.exists()


def test_refs_list_the_experiences_and_relations_a_forced_delete_would_take(profile):
    message = say(profile, "c_0000000000000001", "hello world")
    experience = propose_experience(profile=profile, title="t", content="c", source_mids=[message.mid])
    highlight = add_favourite(profile=profile, message=message).highlight
    relation = link(profile=profile, from_item=highlight, to_item=experience, type="related")
    kinds = {(r["kind"], r["id"]) for r in message_refs(message)}
    assert ("exp", experience.eid) in kinds and ("rel", relation.rid) in kinds


def test_a_forced_delete_cascades_and_tombstones_everything_it_removed(profile):
    message = say(profile, "c_0000000000000001", "hello world")
    experience = propose_experience(profile=profile, title="t", content="c", source_mids=[message.mid])
    highlight = add_favourite(profile=profile, message=message).highlight
    relation = link(profile=profile, from_item=highlight, to_item=experience, type="related")
    result = hard_delete_message(message, force=True)
    expected = {("msg", message.mid), ("hl", highlight.hid), ("exp", experience.eid), ("rel", relation.rid)}
    assert set(result.tombstones) == expected
    assert set(Tombstone.objects.values_list("kind", "object_id")) == expected
    assert not (Message.objects.exists() or Highlight.objects.exists() or Favourite.objects.exists())
    assert not (Experience.objects.exists() or Relation.objects.exists())


def test_an_experience_with_other_sources_only_loses_the_citation(profile):
    gone = say(profile, "c_0000000000000001", "one")
    kept = say(profile, "c_0000000000000002", "two")
    experience = propose_experience(profile=profile, title="t", content="c", source_mids=[gone.mid, kept.mid])
    result = hard_delete_message(gone, force=True)
    experience.refresh_from_db()
    assert result.uncited == [experience.eid]
    assert experience.source_mids == [kept.mid]
    row = experience.history.get(action="source_removed")
    assert row.before["source_mids"] == [gone.mid, kept.mid] and row.actor == "system"
    assert not Tombstone.objects.filter(kind="exp").exists()


def test_a_relation_of_an_uncited_experience_survives(profile):
    gone = say(profile, "c_0000000000000001", "one")
    kept = say(profile, "c_0000000000000002", "two")
    a = propose_experience(profile=profile, title="a", content="c", source_mids=[gone.mid, kept.mid])
    b = propose_experience(profile=profile, title="b", content="c", source_mids=[kept.mid])
    relation = link(profile=profile, from_item=a, to_item=b, type="follows")
    hard_delete_message(gone, force=True)
    assert Relation.objects.filter(pk=relation.pk).exists()


def test_deleting_again_answers_already_gone(profile):
    say(profile, "c_0000000000000001", "x")
    delete_message(profile=profile, mid="c_0000000000000001", hard=True)
    assert delete_message(profile=profile, mid="c_0000000000000001", hard=True).already_gone


def test_a_stale_message_object_answers_already_gone(profile):
    message = say(profile, "c_0000000000000001", "x")
    hard_delete_message(Message.objects.get(pk=message.pk))
    assert hard_delete_message(message).already_gone


def test_an_unknown_mid_without_tombstone_is_not_found(profile):
    with pytest.raises(MessageNotFound):
        delete_message(profile=profile, mid="c_ffffffffffffffff", hard=True)


def test_a_hidden_message_can_be_deleted_for_good(profile):
    message = say(profile, "c_0000000000000001", "x")
    hide_message(message)
    assert hard_delete_message(message).status == "deleted"


def test_hard_delete_removes_the_stored_attachment_file(profile, settings, tmp_path, django_capture_on_commit_callbacks):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    path = default_storage.save(f"images/{profile.pk}/c_0000000000000001.png", ContentFile(b"png"))
    thumb = default_storage.save(f"images/{profile.pk}/c_0000000000000001.thumb.jpg", ContentFile(b"jpg"))
    message = archive_message(
        profile=profile, mid="c_0000000000000001", speaker="user", content="",
        message_type="image", attachment={"path": path, "thumb": thumb},
    ).message
    with django_capture_on_commit_callbacks(execute=True):
        hard_delete_message(message)
    assert not default_storage.exists(path) and not default_storage.exists(thumb)


def test_hard_delete_never_touches_a_file_outside_the_profiles_folder(profile, settings, tmp_path, django_capture_on_commit_callbacks):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    other = default_storage.save(f"images/{profile.pk + 1}/theirs.png", ContentFile(b"png"))
    message = archive_message(  # e.g. a crafted imported record naming someone else's file
        profile=profile, mid="c_0000000000000001", speaker="user", content="",
        message_type="image", attachment={"path": other},
    ).message
    with django_capture_on_commit_callbacks(execute=True):
        hard_delete_message(message)
    assert default_storage.exists(other)


# --- purge and keep (D4), prune (D5) ---


def test_purge_dry_run_counts_and_writes_nothing(profile):
    hide_message(say(profile, "c_0000000000000001", "x"))
    RelationFactory(profile=profile, deleted_at=timezone.now())
    report = purge_soft_deleted(dry_run=True)
    assert (report.selected["msg"], report.selected["rel"]) == (1, 1)
    assert not Tombstone.objects.exists()
    assert Message.objects.soft_deleted().count() == 1 and Relation.objects.count() == 1


def test_purge_hard_deletes_soft_deleted_rows_with_tombstones(profile):
    message = say(profile, "c_0000000000000001", "x")
    hide_message(message)
    experience = ExperienceFactory(profile=profile, deleted_at=timezone.now())
    report = purge_soft_deleted(batch=1)
    assert report.tombstones["msg"] == 1 and report.tombstones["exp"] == 1
    assert not Message.objects.exists() and not Experience.objects.filter(pk=experience.pk).exists()


def test_purge_keeps_live_rows(profile):
    say(profile, "c_0000000000000001", "x")
    purge_soft_deleted()
    assert Message.objects.count() == 1 and not Tombstone.objects.exists()


def test_purge_respects_profile_and_before(profile):
    old = say(profile, "c_0000000000000001", "old")
    hide_message(old, at=timezone.now() - timedelta(days=10))
    hide_message(say(profile, "c_0000000000000002", "new"))
    purge_soft_deleted(profile=profile, before=timezone.now() - timedelta(days=1))
    assert list(Message.objects.values_list("mid", flat=True)) == ["c_0000000000000002"]


def test_keeping_restores_a_message_into_recall(profile):
    message = say(profile, "c_0000000000000001", "我们去看海吧")
    hide_message(message)
    assert restore_records(Message.objects.all()) == 1
    assert found(profile, "看海") == [message.pk]


def test_prune_removes_only_expired_tombstones(profile):
    long_ago = timezone.now() - timedelta(days=500)
    TombstoneFactory(profile=profile, deleted_at=long_ago)
    TombstoneFactory(profile=profile)
    assert prune_tombstones() == 1
    assert Tombstone.objects.count() == 1


def test_prune_dry_run_writes_nothing(profile):
    TombstoneFactory(profile=profile, deleted_at=timezone.now() - timedelta(days=500))
    assert prune_tombstones(dry_run=True) == 1
    assert Tombstone.objects.count() == 1


def test_a_hard_delete_takes_the_raw_legacy_fragments_of_the_line_too_d2(profile):
    """P0-2: the old hard delete left the mem: fragment behind; ours leaves only a tombstone."""
    from memory.interop.export import export_kv
    from memory.models import LegacyFragment

    message = say(profile, "c_00000000000000f1", "秘密 secret words 🐱")
    LegacyFragment.objects.create(
        profile=profile, key="mem:owner:1760968800000_ab", role="user", content="秘密 secret words 🐱",
        ts=1760968800000, message=message, disposition="merged", fingerprint="x",
    )
    delete_message(profile=profile, mid="c_00000000000000f1", hard=True, force=True)
    assert not LegacyFragment.objects.exists()
    assert Tombstone.objects.filter(profile=profile, kind="mem", object_id="mem:owner:1760968800000_ab").exists()
    exported = json.dumps(list(export_kv(profiles=[profile])), ensure_ascii=False)
    assert "secret words" not in exported and "秘密" not in exported
    assert "tomb:owner:mem:mem:owner:1760968800000_ab" in exported
