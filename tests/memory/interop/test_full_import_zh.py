"""Issue 25 point 7 (U-series): the full import's refusals that were still English — the
check phase's `storable()` row checks, the image and zip refusals, the file-level ones and an
interrupted apply — read in Chinese when the interface language is Chinese (the data page, or
`import_full --language zh-hans`), naming the record as the file spells it. In English they read
exactly as before (tests/memory/interop/test_import_batches.py and test_complete_export.py)."""

import json
import re

import pytest
from django.utils import translation

from memory.interop.full_import import BadExport, import_full
from memory.models import Profile
from tests.factories import UserFactory
from tests.memory.interop.test_complete_export import _one_image_export, _zip, import_bytes
from tests.memory.interop.test_import_batches import _rich_export

pytestmark = pytest.mark.django_db

QUOTED = re.compile(r"'[^']*'")
WORD = re.compile(r"[A-Za-z][A-Za-z_]+")
# What a refusal names as the file spells it: kinds, JSON keys, formats, settings, exception names.
NAMES = {"profile", "legacy_fragments", "legacy_meta", "tombstones", "card", "expires_at", "datetime", "tzinfo", "timezone", "messages", "null", "NUL", "zip",
         "export", "json", "Previously", "PREVIOUSLY_IMAGE_MAX_BYTES", "profiles", "JPEG", "PNG", "GIF", "WebP",
         "owner", "c_00000000000000c1"}


def english(text: str) -> set[str]:
    return {w for w in WORD.findall(QUOTED.sub(" ", text)) if w not in NAMES}


def refused_in_chinese(call) -> str:
    with translation.override("zh-hans"), pytest.raises(BadExport) as refused:
        call()
    return str(refused.value)


@pytest.mark.parametrize(("kind", "change", "said"), [
    ("legacy_fragments", {"day_key": None}, "字段 'day_key' 不能为空（null）"),
    ("legacy_fragments", {"legacy_extra": {"k": ["ok", "a\x00b"]}}, "字段 'legacy_extra' 其中有一段文字含有 NUL 字符"),
    ("tombstones", {"expires_at": "2020-01-01T00:00:00+00:00", "deleted_at": "2021-01-01T00:00:00+00:00"},
     "违反了数据库的规则 'tombstone_expires_after_deletion'"),
    ("card", {"version": -1}, "字段 'version' -1 无法保存（"),
], ids=["null", "nul-in-json", "check-constraint", "validator"])
def test_a_row_the_database_would_refuse_is_refused_in_chinese(tmp_path, kind, change, said):
    """Before: "伙伴 'owner', legacy_fragments 'x': field 'day_key' cannot be empty (null)" — the
    record's name translated, the problem not."""
    data = _rich_export(tmp_path)
    profile = data["profiles"][0]
    (profile["card"] if kind == "card" else profile[kind][-1]).update(change)
    user = UserFactory()
    error = refused_in_chinese(lambda: import_full(data=data, user=user))
    assert said in error and f"伙伴 {profile['key']!r}" in error, error
    assert english(error) == set(), error
    assert not Profile.objects.filter(user=user).exists()


@pytest.mark.parametrize(("members", "said"), [
    ({"export.json": json.dumps(_one_image_export()), "images/owner/c_00000000000000c1.png": b"<html>not</html>"},
     "伙伴 'owner', messages[0] ('c_00000000000000c1')：图片 'images/owner/c_00000000000000c1.png' 被拒绝："),
    ({"export.json": json.dumps(_one_image_export())}, "导出文件里没有图片文件 'images/owner/c_00000000000000c1.png'"),
    ({"data.json": "{}"}, "zip 格式的导出应包含 export.json，这个 zip 里没有。没有写入任何内容。"),
], ids=["not-an-image", "no-image-file", "no-export-json"])
def test_a_refused_zip_export_is_explained_in_chinese(tmp_path, members, said):
    error = refused_in_chinese(lambda: import_bytes(_zip(members), UserFactory(), tmp_path, dry_run=True))
    assert said in error, error
    assert english(error) == set(), error


@pytest.mark.parametrize(("data", "said"), [
    ({"format": "nope"}, "这不是 Previously 的导出文件（应为格式 'previously-export'）"),
    ({"format": "previously-export", "version": 99, "profiles": []}, "不支持导出版本 99"),
    ({"format": "previously-export", "version": 2, "profiles": "全部"}, "profiles 必须是列表"),
], ids=["not-an-export", "version", "profiles-not-a-list"])
def test_a_file_that_is_no_export_is_refused_in_chinese(data, said):
    error = refused_in_chinese(lambda: import_full(data=data, user=UserFactory(), dry_run=True))
    assert said in error and english(error) == set(), error


def test_in_english_the_refusals_read_as_before(tmp_path):
    with pytest.raises(BadExport, match=r"^not a Previously export \(expected format 'previously-export'\)$"):
        import_full(data={"format": "nope"}, user=UserFactory(), dry_run=True)
    with pytest.raises(BadExport, match=r"^export version 99 is not supported \(this app reads "):
        import_full(data={"format": "previously-export", "version": 99, "profiles": []}, user=UserFactory())
