"""Full export (SPEC X1) and the legacy kv round trip (A6, LEGACY_KV rule 7)."""

import base64
import json
from io import StringIO

import pytest
from django.core.management import call_command

from bench.synthetic import write_dump
from memory.models.archive import PROFILE_KEY_RE
from tests.factories import MessageFactory, ProfileFactory, TombstoneFactory

pytestmark = pytest.mark.django_db


def _entries_by_key(items: list[dict]) -> dict:
    out = {}
    for item in items:
        text = base64.b64decode(item["value"]).decode() if item.get("base64") else item["value"]
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        if not isinstance(value, (dict, list)):
            value = text  # meta values are text, compare them verbatim
        attrs = {k: v for k, v in item.items() if k not in ("key", "value")}
        out[item["key"]] = (value, attrs)
    return out


def _fallback_under_owner(entries: dict) -> dict:
    """LEGACY_KV rule 5 + issue 15: a record whose profile failed P1's regex was imported under
    `owner` and exports as owner's — the one documented renaming of the round trip."""
    out = {}
    for key, (value, attrs) in entries.items():
        family, _, rest = key.partition(":")
        if family in ("msg", "mem", "hl", "exp", "rel", "tomb") and rest:
            tail = key.split(":")[-2 if family == "tomb" else -1:]
            profile = rest[: -len(":".join(tail)) - 1]
            if not PROFILE_KEY_RE.match(profile):
                key = ":".join([family, "owner", *tail])
                if isinstance(value, dict) and "profile_id" in value:
                    value = {**value, "profile_id": "owner"}
        out[key] = (value, attrs)
    return out


def test_x1_json_export_holds_tombstones_and_messages(user):
    profile = ProfileFactory(user=user, key="owner")
    MessageFactory(profile=profile, content="你好 🐱")
    TombstoneFactory(profile=profile, object_id="c_0000000000000001")
    out = StringIO()
    call_command("export_full", "--user", "alice", stdout=out, stderr=StringIO())
    data = json.loads(out.getvalue())
    assert data["format"] == "previously-export" and data["version"] == 2
    (p,) = data["profiles"]
    assert [m["content"] for m in p["messages"]] == ["你好 🐱"]
    assert [t["object_id"] for t in p["tombstones"]] == ["c_0000000000000001"]


def test_a6_kv_round_trip_gives_back_the_imported_dump(admin, tmp_path):
    """Import a synthetic dump, export kv, compare: equal but for the documented differences."""
    dump = tmp_path / "in.json"
    write_dump(str(dump), keys=800, seed=5)
    call_command("import_kv", str(dump), stdout=StringIO())
    out = tmp_path / "out.json"
    call_command("export_full", "--format", "kv", "--output", str(out), stderr=StringIO())
    before = _fallback_under_owner(_entries_by_key(json.loads(dump.read_text())))
    after = _entries_by_key(json.loads(out.read_text()))
    from memory.models import LegacyFragment, Message

    suppressed = set(LegacyFragment.objects.filter(disposition="suppressed").values_list("key", flat=True))
    born = {f"msg:{m.profile.key}:{m.mid}" for m in Message.objects.filter(legacy_extra__origin="fragment")}
    tombstoned_msgs = {k for k in before if k.startswith("msg:") and k not in after}
    assert suppressed  # the dump has P0-2 leftovers
    missing = set(before) - set(after) - suppressed - tombstoned_msgs
    assert missing == set()
    assert set(after) - set(before) == born
    for key in set(before) & set(after):
        b_value, b_attrs = before[key]
        a_value, a_attrs = after[key]
        assert a_value == b_value, key
        if not key.startswith("tomb:"):
            assert a_attrs == b_attrs, key


def test_kv_export_keeps_soft_deleted_records_with_deleted_at(admin, tmp_path):
    dump = tmp_path / "in.json"
    dump.write_text(json.dumps([{"key": "msg:owner:c_00000000000000aa", "value": json.dumps({
        "profile_id": "owner", "speaker": "user", "message_type": "text", "created_at": "2025-10-20T14:00:00.000Z",
        "deleted_at": "2025-10-21T14:00:00.000Z", "content": "软删除"}, ensure_ascii=False)}]))
    call_command("import_kv", str(dump), stdout=StringIO())
    out = StringIO()
    call_command("export_full", "--format", "kv", stdout=out, stderr=StringIO())
    (item,) = json.loads(out.getvalue())
    assert json.loads(item["value"])["deleted_at"] == "2025-10-21T14:00:00.000Z"
