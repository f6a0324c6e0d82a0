"""The legacy KV importer (SPEC X3, X4, X5, A6, D4, P1, P3; LEGACY_KV.md rules 1-9)."""

import base64
import json
from datetime import UTC, datetime

import pytest

from memory.hashing import content_hash
from memory.interop.kv_import import fragment_mid
from memory.models import (
    Experience,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    Message,
    Profile,
    Relation,
    Slice,
    Tombstone,
)
from tests.memory.interop.conftest import entry, iso, mem, msg

pytestmark = pytest.mark.django_db

T = 1_760_968_800_000  # 2025-10-20T14:00:00Z


def counts() -> dict:
    return {
        m.__name__: m.objects.count()
        for m in (Message, LegacyFragment, Highlight, Experience, Relation, Tombstone, LegacyMeta, Slice, Profile)
    }


# ---------------------------------------------------------------- rule 1: one source of truth


def test_rule1_dual_written_user_line_becomes_one_message(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000a1", "user", "你好，今天好累 😮‍💨", T),
                      mem("mem:owner:1760968800003_ab12cd", "user", "你好，今天好累 😮‍💨", T + 3)])
    code, _ = run_import(path)
    assert code == 0
    message = Message.objects.get()
    assert message.mid == "c_00000000000000a1"
    assert LegacyFragment.objects.get().disposition == "merged"
    assert LegacyFragment.objects.get().message == message


def test_rule1_assistant_fragment_with_markers_merges_with_cleaned_msg(dump_file, run_import):
    path = dump_file([msg("owner", "a_1760968802000_x1y2z3", "assistant", "记得带伞 ☔ bring an umbrella", T + 2000),
                      mem("mem:owner:1760968802004_zz", "assistant", "记得带伞 ☔ bring an umbrella [[fav:带伞]]", T + 2004)])
    run_import(path)
    message = Message.objects.get()
    assert message.content == "记得带伞 ☔ bring an umbrella"
    assert message.raw_content == "记得带伞 ☔ bring an umbrella [[fav:带伞]]"
    assert LegacyFragment.objects.get().disposition == "merged"


def test_rule1_fragment_too_far_in_time_from_its_msg_is_not_merged(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000a2", "user", "same words", T),
                      mem("mem:owner:1760968900000_ab", "user", "same words", T + 100_000)])
    run_import(path)
    assert Message.objects.count() == 2
    assert LegacyFragment.objects.get().disposition == "own"


def test_rule1_orphan_assistant_fragment_is_cleaned_and_keeps_raw(dump_file, run_import):
    key = "mem:owner:1760968800000_q1"
    run_import(dump_file([mem(key, "assistant", "好的，我记住了。[[fav:喜欢猫]]", T)]))
    message = Message.objects.get()
    assert message.content == "好的，我记住了。"
    assert message.raw_content == "好的，我记住了。[[fav:喜欢猫]]"
    assert message.speaker == "assistant"
    assert message.mid == fragment_mid(key, "assistant", T)


def test_rule1_orphan_fragment_id_is_deterministic_from_its_key(dump_file, run_import):
    key = "mem:owner:1760968800000_q2"
    run_import(dump_file([mem(key, "user", "Hello 世界", T)]))
    assert Message.objects.get().mid == fragment_mid(key, "user", T)
    assert fragment_mid(key, "user", T) == fragment_mid(key, "user", T)
    assert Message.objects.get().mid.startswith("c_")


def test_rule1_legacy_markers_are_not_acted_on_again(dump_file, run_import):
    run_import(dump_file([mem("mem:owner:1760968800000_q3", "assistant", "嗯 [[fav:我喜欢猫]]", T)]))
    assert Highlight.objects.count() == 0


# ---------------------------------------------------------------- rule 2: duplicates


def test_rule2_retried_fragment_under_two_keys_is_one_message(dump_file, run_import):
    path = dump_file([mem("mem:owner:1760968800000_aaa", "user", "重复 twice 🐱", T),
                      mem("mem:owner:1760968800000_bbb", "user", "重复 twice 🐱", T)])
    code, out = run_import(path)
    assert Message.objects.count() == 1
    assert sorted(LegacyFragment.objects.values_list("disposition", flat=True)) == ["duplicate", "own"]
    assert LegacyFragment.objects.get(disposition="duplicate").message == Message.objects.get()


def test_rule2_duplicate_is_counted_in_the_report(dump_file, run_import, tmp_path):
    path = dump_file([mem("mem:owner:1760968800000_aaa", "user", "x", T),
                      mem("mem:owner:1760968800000_bbb", "user", "x", T)])
    run_import(path, "--report-json", str(tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["families"]["mem"]["duplicate"] == 1
    assert report["families"]["mem"]["created"] == 1


# ---------------------------------------------------------------- rule 3: soft deletes


def test_rule3_soft_deleted_msg_is_imported_soft_deleted(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000b1", "user", "删掉我", T, deleted_at=iso(T + 86_400_000))])
    run_import(path)
    assert Message.objects.get().deleted_at == datetime.fromtimestamp((T + 86_400_000) / 1000, tz=UTC)
    assert Message.objects.live().count() == 0


def test_rule3_fragment_of_soft_deleted_msg_does_not_come_back_live(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000b2", "user", "secret 秘密", T, deleted_at=iso(T + 1000)),
                      mem("mem:owner:1760968800002_c", "user", "secret 秘密", T + 2)])
    run_import(path)
    assert Message.objects.count() == 1
    assert Message.objects.live().count() == 0
    assert LegacyFragment.objects.get().disposition == "merged"


# ---------------------------------------------------------------- rule 4: tombstones first


def _tomb(profile, mid, content, ts):
    return entry(f"tomb:{profile}:msg:{mid}",
                 {"kind": "msg", "id": mid, "deleted_at": iso(ts + 86_400_000),
                  "content_hash": content_hash(profile, content), "created_at": iso(ts)},
                 expiration=int(ts / 1000) + 401 * 86400)


def test_rule4_tombstoned_msg_record_is_skipped_and_counted(dump_file, run_import, tmp_path):
    path = dump_file([msg("owner", "c_00000000000000c1", "user", "gone", T),
                      _tomb("owner", "c_00000000000000c1", "gone", T)])
    run_import(path, "--report-json", str(tmp_path / "r.json"))
    assert Message.objects.count() == 0
    assert json.loads((tmp_path / "r.json").read_text())["families"]["msg"]["tombstoned"] == 1


def test_rule4_tombstone_listed_after_the_record_still_blocks_it(dump_file, run_import):
    path = dump_file([_tomb("owner", "c_00000000000000c2", "later", T),
                      msg("owner", "c_00000000000000c2", "user", "later", T)][::-1])
    run_import(path)
    assert Message.objects.count() == 0
    assert Tombstone.objects.get().object_id == "c_00000000000000c2"


def test_rule4_left_over_fragment_of_hard_deleted_msg_is_suppressed_by_strhash(dump_file, run_import):
    """P0-2: the old hard delete left the mem: fragment; its words must stay deleted."""
    path = dump_file([_tomb("owner", "c_00000000000000c3", "我其实很讨厌我的工作", T),
                      mem("mem:owner:1760968800004_left", "user", "我其实很讨厌我的工作", T + 4)])
    run_import(path)
    assert Message.objects.count() == 0
    frag = LegacyFragment.objects.get()
    assert frag.disposition == "suppressed"
    assert frag.content == ""


def test_rule4_same_words_at_another_time_stay(dump_file, run_import):
    path = dump_file([_tomb("owner", "c_00000000000000c4", "晚安 🌙", T),
                      mem("mem:owner:1760968800004_left", "user", "晚安 🌙", T + 4),
                      mem("mem:owner:1761055200000_next", "user", "晚安 🌙", T + 86_400_000)])
    run_import(path)
    assert list(Message.objects.values_list("content", flat=True)) == ["晚安 🌙"]
    assert Message.objects.get().created_at == datetime.fromtimestamp((T + 86_400_000) / 1000, tz=UTC)


def test_rule4_suppression_is_per_profile(dump_file, run_import):
    path = dump_file([_tomb("owner", "c_00000000000000c5", "hi", T),
                      mem("mem:test_2:1760968800004_left", "user", "hi", T + 4)])
    run_import(path)
    assert Message.objects.get().profile.key == "test_2"


def test_rule4_tombstone_in_database_blocks_reimport_of_the_record(dump_file, run_import, admin):
    from tests.factories import ProfileFactory, TombstoneFactory

    profile = ProfileFactory(user=admin, key="owner")
    TombstoneFactory(profile=profile, kind="msg", object_id="c_00000000000000c6")
    run_import(dump_file([msg("owner", "c_00000000000000c6", "user", "deleted here", T)]))
    assert Message.objects.count() == 0


def test_rule4_tombstone_keeps_iso_expiration(dump_file, run_import):
    t = _tomb("owner", "c_00000000000000c7", "x", T)
    t["expiration"] = "2027-11-25T00:00:00Z"
    run_import(dump_file([t]))
    assert Tombstone.objects.get().expires_at == datetime(2027, 11, 25, tzinfo=UTC)


def test_rule4_tombstone_keeps_epoch_expiration(dump_file, run_import):
    t = _tomb("owner", "c_00000000000000c8", "x", T)
    t["expiration"] = 1_800_000_000
    run_import(dump_file([t]))
    assert Tombstone.objects.get().expires_at == datetime.fromtimestamp(1_800_000_000, tz=UTC)
    assert Tombstone.objects.get().legacy_extra["_kv"]["expiration"] == 1_800_000_000


# ---------------------------------------------------------------- rule 5: profiles


def test_rule5_invalid_profile_falls_back_to_owner_and_is_reported(dump_file, run_import):
    code, out = run_import(dump_file([msg("Bad Profile!", "c_00000000000000d1", "user", "hey", T)]))
    assert Message.objects.get().profile.key == "owner"
    assert "profile fallback: msg:Bad Profile!:c_00000000000000d1" in out


def test_rule5_mem_underscore_keys_belong_to_owner(dump_file, run_import):
    run_import(dump_file([mem("mem_1760968800000_v0abc", "user", "v0 记忆", T)]))
    assert Message.objects.get().profile.key == "owner"
    assert LegacyFragment.objects.get().key == "mem_1760968800000_v0abc"


def test_rule5_profiles_are_created_under_the_given_user(dump_file, run_import, django_user_model):
    bob = django_user_model.objects.create_user(username="bob", password="pw-bob-1234")
    run_import(dump_file([msg("test_2", "c_00000000000000d2", "user", "hey", T)]), "--user", "bob")
    assert Profile.objects.get().user == bob


def test_rule5_profiles_default_to_the_first_superuser(dump_file, run_import, admin):
    run_import(dump_file([msg("test_2", "c_00000000000000d3", "user", "hey", T)]))
    assert Profile.objects.get().user == admin


def test_unknown_user_is_a_usage_error(dump_file, run_import):
    code, out = run_import(dump_file([]), "--user", "nobody")
    assert code == 2
    assert "nobody" in out


# ---------------------------------------------------------------- rule 6: references


def test_rule6_verbatim_highlight_links_its_message(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000e1", "user", "I love 猫咪 so much", T),
                      entry("hl:owner:h_1", {"mid": "c_00000000000000e1", "content": "love 猫咪",
                                             "created_at": iso(T), "deleted_at": None})])
    run_import(path)
    hl = Highlight.objects.get()
    assert hl.message.mid == "c_00000000000000e1"
    assert hl.flagged == ""


def test_rule6_non_verbatim_highlight_is_flagged_not_dropped(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000e2", "user", "I love cats", T),
                      entry("hl:owner:h_2", {"mid": "c_00000000000000e2", "content": "loves dogs",
                                             "created_at": iso(T), "deleted_at": None})])
    code, out = run_import(path)
    assert "not found verbatim" in Highlight.objects.get().flagged
    assert "flagged hl:owner:h_2" in out


def test_rule6_highlight_of_missing_message_is_flagged(dump_file, run_import):
    run_import(dump_file([entry("hl:owner:h_3", {"mid": "c_ffffffffffffffff", "content": "x",
                                                 "created_at": iso(T), "deleted_at": None})]))
    hl = Highlight.objects.get()
    assert hl.message is None
    assert "missing" in hl.flagged


def test_rule6_experience_with_missing_source_is_flagged(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000e3", "user", "去年夏天去了青岛", T),
                      entry("exp:owner:e_1", {"title": "青岛旅行", "content": "去过青岛",
                                              "source_mids": ["c_00000000000000e3", "c_0000000000000404"],
                                              "status": "active", "time_certainty": "approximate",
                                              "event_time": "去年夏天", "created_at": iso(T), "deleted_at": None})])
    run_import(path)
    exp = Experience.objects.get()
    assert "c_0000000000000404" in exp.flagged
    assert exp.source_mids == ["c_00000000000000e3", "c_0000000000000404"]
    assert Experience.objects.active().count() == 0
    assert exp.event_time_text == "去年夏天"


def test_rule6_experience_with_all_sources_is_active(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000e4", "user", "I run every day", T),
                      entry("exp:owner:e_2", {"title": "runner", "content": "runs daily",
                                              "source_mids": ["c_00000000000000e4"], "status": "active",
                                              "time_certainty": "exact", "event_time": iso(T),
                                              "created_at": iso(T), "deleted_at": None})])
    run_import(path)
    assert Experience.objects.active().get().history.get().actor == "import"


def test_rule6_relation_with_missing_end_is_flagged(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000e5", "user", "abc", T),
                      entry("hl:owner:h_5", {"mid": "c_00000000000000e5", "content": "abc",
                                             "created_at": iso(T), "deleted_at": None}),
                      entry("rel:owner:r_1", {"from_id": "h_5", "to_id": "e_gone", "type": "causes",
                                              "created_at": iso(T), "deleted_at": None})])
    run_import(path)
    rel = Relation.objects.get()
    assert rel.from_highlight.hid == "h_5"
    assert "e_gone" in rel.flagged


def test_rule6_relation_with_both_ends_resolves_them(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000e6", "user", "abc", T),
                      entry("hl:owner:h_6", {"mid": "c_00000000000000e6", "content": "abc",
                                             "created_at": iso(T), "deleted_at": None}),
                      entry("exp:owner:e_6", {"title": "t", "content": "c", "source_mids": ["c_00000000000000e6"],
                                              "status": "candidate", "time_certainty": "unknown",
                                              "created_at": iso(T), "deleted_at": None}),
                      entry("rel:owner:r_6", {"from_id": "h_6", "to_id": "e_6", "type": "part_of",
                                              "created_at": iso(T), "deleted_at": None})])
    run_import(path)
    rel = Relation.objects.get()
    assert (rel.from_highlight.hid, rel.to_experience.eid, rel.flagged) == ("h_6", "e_6", "")


# ---------------------------------------------------------------- rule 7: keys and hashes


def test_rule7_message_keeps_its_key_and_stored_hash(dump_file, run_import):
    e = msg("owner", "c_00000000000000f1", "user", "你好", T)
    value = json.loads(e["value"])
    value["content_hash"] = "deadbeef"  # kept as imported, never recomputed
    e["value"] = json.dumps(value)
    run_import(dump_file([e]))
    message = Message.objects.get()
    assert message.legacy_key == "msg:owner:c_00000000000000f1"
    assert message.content_hash == "deadbeef"


def test_rule7_reimport_of_the_same_dump_writes_nothing(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000f2", "user", "hi 👋", T),
                      mem("mem:owner:1760968800001_a", "user", "hi 👋", T + 1),
                      mem("mem:owner:1760960000000_b", "user", "older", T - 8_800_000),
                      _tomb("owner", "c_00000000000000f3", "bye", T),
                      entry("meta_lastTs:owner", str(T), metadata={"v": 1})])
    run_import(path)
    before = counts()
    code, out = run_import(path)
    assert code == 0
    assert counts() == before
    assert "total" in out


def test_kv_expiration_and_metadata_are_kept(dump_file, run_import):
    e = msg("owner", "c_00000000000000f4", "user", "x", T)
    e.update(expiration=1_900_000_000, metadata={"source": "worker", "v": 2})
    run_import(dump_file([e]))
    assert Message.objects.get().legacy_extra["_kv"] == {"expiration": 1_900_000_000,
                                                         "metadata": {"source": "worker", "v": 2}}


def test_image_message_keeps_attachment_metadata(dump_file, run_import):
    attachment = {"name": "猫.jpg", "mime": "image/jpeg", "size": 48213, "width": 800, "height": 600}
    run_import(dump_file([msg("owner", "c_00000000000000f5", "user", "", T, message_type="image",
                              attachment=attachment)]))
    message = Message.objects.get()
    assert (message.message_type, message.attachment) == ("image", attachment)


def test_meta_keys_are_kept_verbatim(dump_file, run_import):
    run_import(dump_file([entry("meta_lastTs:owner", "1760968800000", metadata={"v": 1}),
                          entry("meta_proactiveCount:owner:2026-10-20", "2"),
                          entry("meta_schemaVersion", "2")]))
    assert LegacyMeta.objects.get(key="meta_lastTs:owner").metadata == {"v": 1}
    assert LegacyMeta.objects.get(key="meta_lastTs:owner").profile.key == "owner"
    assert LegacyMeta.objects.get(key="meta_schemaVersion").profile is None


def test_base64_values_are_decoded(dump_file, run_import):
    e = msg("owner", "c_00000000000000f6", "user", "base64 编码 ✓", T)
    e["value"] = base64.b64encode(e["value"].encode()).decode()
    e["base64"] = True
    run_import(dump_file([e]))
    assert Message.objects.get().content == "base64 编码 ✓"


# ---------------------------------------------------------------- dump shapes


def test_bulk_get_shape_with_trailing_success_line(dump_file, run_import):
    value = json.loads(msg("owner", "c_00000000000000f7", "user", "bulk get 读取", T)["value"])
    raw = json.dumps({"msg:owner:c_00000000000000f7": json.dumps(value, ensure_ascii=False),
                      "meta_lastTs:owner": {"value": str(T), "metadata": {"v": 1}}}, ensure_ascii=False)
    code, _ = run_import(dump_file(None, raw=raw + "\nSuccess!\n"))
    assert code == 0
    assert Message.objects.get().content == "bulk get 读取"
    assert LegacyMeta.objects.get().metadata == {"v": 1}


def test_synthetic_dump_imports_in_both_shapes_alike(tmp_path, run_import):
    from bench.synthetic import write_dump

    write_dump(str(tmp_path / "put.json"), keys=600, seed=3, shape="put")
    write_dump(str(tmp_path / "get.json"), keys=600, seed=3, shape="get")
    assert run_import(str(tmp_path / "put.json"))[0] == 0
    before = counts()
    code, out = run_import(str(tmp_path / "get.json"))
    assert code == 0
    assert counts() == before  # the same data: the second import finds everything


# ---------------------------------------------------------------- rule 8: all or nothing


def test_rule8_bad_json_exits_1_and_writes_nothing(dump_file, run_import):
    good = json.dumps([msg("owner", "c_00000000000000a9", "user", "ok", T)])
    code, out = run_import(dump_file(None, raw=good[:-1] + ', {"key": "msg:owner:c_1", "value": }]'))
    assert code == 1
    assert "msg:owner:c_00000000000000a9" in out
    assert counts()["Message"] == 0


def test_rule8_unparsable_value_names_the_key(dump_file, run_import):
    path = dump_file([msg("owner", "c_00000000000000a8", "user", "ok", T),
                      {"key": "msg:owner:c_00000000000000a7", "value": "{not json"}])
    code, out = run_import(path)
    assert code == 1
    assert "msg:owner:c_00000000000000a7" in out and "does not parse" in out
    assert counts()["Message"] == 0
    assert counts()["Profile"] == 0


def test_rule8_unknown_family_names_the_key(dump_file, run_import):
    code, out = run_import(dump_file([msg("owner", "c_00000000000000a6", "user", "ok", T),
                                      entry("fav:owner:1", {"x": 1})]))
    assert code == 1
    assert "fav:owner:1" in out and "unknown key family" in out
    assert counts()["Message"] == 0


def test_rule8_a_key_given_twice_is_a_bad_record_named_not_a_crash(dump_file, run_import):
    """A KV store holds each key once; a dump repeating a fragment's key made the import die on
    the table's UNIQUE constraint (found by the hostile-dump property test). Refused by name,
    nothing written; with --skip-bad the first is kept and the repeat counted as an error."""
    twice = mem("mem:owner:1760968800000_ab12cd", "user", "今天很好 🌙", T)
    path = dump_file([twice, msg("owner", "c_00000000000000a3", "user", "ok", T + 60_000), twice])
    code, out = run_import(path)
    assert code == 1
    assert "mem:owner:1760968800000_ab12cd" in out and "appears twice" in out
    assert counts()["Message"] == 0 and counts()["LegacyFragment"] == 0
    code, out = run_import(path, "--skip-bad")
    assert code == 0 and LegacyFragment.objects.count() == 1


def test_rule8_skip_bad_imports_the_rest_and_reports(dump_file, run_import, tmp_path):
    path = dump_file([msg("owner", "c_00000000000000a5", "user", "ok", T),
                      {"key": "hl:owner:h_bad", "value": "[1, 2"},
                      entry("fav:owner:1", {"x": 1})])
    code, out = run_import(path, "--skip-bad", "--report-json", str(tmp_path / "r.json"))
    assert code == 0
    assert Message.objects.count() == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["families"]["hl"]["errors"] == 1
    assert report["families"]["unknown"]["errors"] == 1
    assert "skipped bad record hl:owner:h_bad" in out


def test_rule8_dry_run_writes_nothing_but_reports(dump_file, run_import):
    code, out = run_import(dump_file([msg("owner", "c_00000000000000a4", "user", "ok", T)]), "--dry-run")
    assert code == 0
    assert counts()["Message"] == 0 and counts()["Profile"] == 0
    assert "dry run" in out
    assert "msg" in out


def test_missing_dump_file_is_a_usage_error(run_import, tmp_path):
    assert run_import(str(tmp_path / "nope.json"))[0] == 2


# ---------------------------------------------------------------- rule 9 and slices


def test_rule9_report_table_has_every_column(dump_file, run_import):
    code, out = run_import(dump_file([msg("owner", "c_00000000000000a3", "user", "ok", T)]))
    header = next(line for line in out.splitlines() if line.startswith("family"))
    for column in ("read", "created", "merged", "duplicate", "tombstoned", "soft_deleted", "flagged", "errors"):
        assert column in header


def test_s1_imported_messages_are_grouped_into_slices_by_idle_gap(dump_file, run_import, settings):
    settings.PREVIOUSLY_SLICE_GAP_MINUTES = 30
    path = dump_file([msg("owner", "c_0000000000000101", "user", "one", T),
                      msg("owner", "c_0000000000000102", "user", "two", T + 10 * 60_000),
                      msg("owner", "c_0000000000000103", "user", "three", T + 3 * 3_600_000)])
    run_import(path)
    slices = list(Slice.objects.order_by("started_at"))
    assert [s.messages.count() for s in slices] == [2, 1]
    assert slices[0].close_reason == "import"
    assert slices[0].key == "2025-10-20-1400"


def test_s1_slice_key_uses_the_local_clock_of_the_fragments(dump_file, run_import):
    run_import(dump_file([mem("mem:owner:1760968800000_z", "user", "晚上好", T)]))  # hour 21 local, 14 UTC
    assert Slice.objects.get().key == "2025-10-20-2100"
    assert Message.objects.get().local_hour == 21


def test_s1_later_import_reuses_the_existing_slice(dump_file, run_import):
    run_import(dump_file([msg("owner", "c_0000000000000111", "user", "one", T)]))
    run_import(dump_file([msg("owner", "c_0000000000000112", "user", "two", T + 5 * 60_000)]))
    assert Slice.objects.count() == 1
    assert Slice.objects.get().messages.count() == 2


# ---------------------------------------------------------------- the recall index (R2, D3)


def test_imported_live_messages_are_recallable_and_soft_deleted_ones_are_not(dump_file, run_import):
    from memory.recall.index import search
    from memory.recall.tokenize import tokenize

    path = dump_file([
        msg("owner", "c_00000000000000c1", "user", "我养了一只橘猫 named Mochi", T),
        msg("owner", "c_00000000000000c2", "user", "secret mochi recipe", T + 60_000, deleted_at=iso(T + 90_000)),
    ])
    assert run_import(path)[0] == 0
    profile = Profile.objects.get(key="owner")
    found = search(profile_id=profile.pk, tokens=tokenize("Mochi 橘猫"), limit=10)
    assert [Message.objects.get(pk=h.message_id).mid for h in found] == ["c_00000000000000c1"]
