"""Issue 25 point 7 (U-series): `import_kv --language zh-hans` names a bad record and says what
is wrong with it in Chinese: the lead sentence and the record's detail. Without --language the
refusal reads as it always did, in English (LEGACY_KV.md rule 8)."""

import re

import pytest

from memory.models import Message
from tests.memory.interop.conftest import entry, mem, msg

pytestmark = pytest.mark.django_db

TS = 1760986800000
# What a refusal names as the dump spells it: keys, field names and their allowed values, formats.
NAMES = {"owner", "msg", "mem", "hl", "exp", "rel", "tomb", "meta_", "mem_", "speaker", "user", "assistant", "role",
         "ts", "hour", "day_key", "YYYY", "MM", "DD", "value", "base64", "UTF", "JSON", "created_at", "ISO",
         "status", "active", "candidate", "NUL", "u0000", "profile", "id", "expiration", "type", "from_id", "to_id",
         "title", "content", "content_hash", "strHash", "base", "x", "int", "str", "list"}
WORD = re.compile(r"[A-Za-z][A-Za-z_]+")

BAD = {
    "speaker": msg("owner", "c_1", "机器人", "你好", TS),
    "hour": entry("mem:owner:k1", {"role": "user", "content": "你好", "ts": TS, "hour": 31}),
    "time": msg("owner", "c_2", "user", "你好", TS, created_at="昨天晚上"),
    "json": entry("msg:owner:c_3", '{"speaker": "user", 来'),
    "not-object": entry("msg:owner:c_4", "[1, 2]"),
    "family": entry("ghost:owner:1", {"content": "幽灵"}),
    "base64": entry("msg:owner:c_5", "不是base64", base64=True),
    "missing": entry("mem:owner:k2", {"content": "你好", "ts": TS}),
    "not-text": entry("mem:owner:k3", {"role": "user", "content": 7, "ts": TS}),
}


def english(text: str) -> set[str]:
    return {w for w in WORD.findall(text.replace("'", " ")) if w not in NAMES}


@pytest.mark.parametrize("name", BAD)
def test_a_bad_record_is_refused_in_chinese(dump_file, run_import, name):
    """Before: "bad record msg:owner:c_1: speaker '机器人' is not user or assistant. Nothing was written."
    (and no --language)."""
    path = dump_file([mem("mem:owner:k0", "user", "好的", TS), BAD[name]])
    code, text = run_import(path, "--language", "zh-hans")
    assert code == 1
    assert "没有写入任何内容" in text and BAD[name]["key"] in text  # the lead, and the record by its key
    assert english(text.replace(BAD[name]["key"], " ")) == set(), text
    assert Message.objects.count() == 0


def test_without_language_the_refusal_stays_english(dump_file, run_import):
    code, text = run_import(dump_file([BAD["speaker"]]))
    assert (code, text) == (1, "bad record msg:owner:c_1: speaker '机器人' is not user or assistant. Nothing was written.")


def test_skipped_records_are_noted_in_chinese(dump_file, run_import):
    code, text = run_import(dump_file([mem("mem:owner:k0", "user", "好的", TS), BAD["hour"]]),
                            "--skip-bad", "--language", "zh-hans")
    assert code == 0
    assert "跳过了有问题的记录 mem:owner:k1：hour 31 不在 0-23 之间" in text


def test_an_unknown_language_is_a_usage_error(dump_file, run_import):
    code, text = run_import(dump_file([BAD["speaker"]]), "--language", "klingon")
    assert code == 2 and "klingon" in text
