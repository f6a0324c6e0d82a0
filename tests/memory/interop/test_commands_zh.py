"""Issue 25 point 7 (U-series): the import commands and the card command speak the language
`--language` names. `import_kv` had the option, but its malformed-dump refusals
(`DumpFormatError`), its notes (flagged records, kept meta keys) and its table and last line
were still English; `import_full`, `import_history` and `card` had no `--language` at all.
Without the option every command reads exactly as before."""

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memory.interop.full_import import KINDS
from memory.models import Highlight
from tests.memory.card.samples import SEED_CARD
from tests.memory.history import samples as s
from tests.memory.interop.conftest import entry, iso, msg

pytestmark = pytest.mark.django_db

T = 1760986800000
# A good first record, so the dump's fault after it is what refuses the file.
FIRST = json.dumps(msg("owner", "c_00000000000000e1", "user", "你好", T), ensure_ascii=False)
QUOTED = re.compile(r"'[^']*'")
WORD = re.compile(r"[A-Za-z][A-Za-z_]+")


def words(text: str, *names: str) -> set[str]:
    """The English words left once what a line names (quoted values, paths, keys) is taken out."""
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " ")
    return {w for w in WORD.findall(QUOTED.sub(" ", text))}


def run(command: str, *args) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command(command, *args, stdout=out, stderr=StringIO())
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, out.getvalue()


# --- import_kv ------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, said", [
    ("", "文件是空的"),
    ('"just a string"', "这不是 KV 导出文件"),
    (f"[{FIRST} nope", "JSON 有误：应为 ',' 或 ']'"),
    ('[{"value": "{}"}]', "条目有误"),
    ('{"msg:owner:c_1" "x"}', "键后面应为 ':'"),
    (f"[{FIRST}] trailing words", "JSON 之后还有多余的文字"),
    ('[{"key": "msg:owner:c_1", "value": }]', "JSON 有误：缺少值"),
], ids=["empty", "not-a-dump", "separator", "entry", "colon", "after", "json"])
def test_a_malformed_dump_is_refused_in_chinese(dump_file, admin, raw, said):
    """Before: "导出文件格式有误 at key 'msg:owner:c_1' (character 40): bad JSON: expected ',' or ']', …"."""
    code, text = run("import_kv", dump_file(None, raw=raw), "--language", "zh-hans")
    assert code == 1 and said in text and "没有写入任何内容" in text, text
    assert words(text, "msg:owner:c_00000000000000e1") - {"KV", "JSON", "bulk", "put", "get"} == set(), text


def test_a_malformed_dump_still_reads_in_english_without_language(dump_file, admin):
    code, text = run("import_kv", dump_file(None, raw=f"[{FIRST} nope"))
    assert (code, text) == (1, f"malformed dump at key 'msg:owner:c_00000000000000e1' (character {len(FIRST) + 2}):"
                               " bad JSON: expected ',' or ']', found 'n'. Nothing was written.")


def test_the_legacy_imports_notes_table_and_last_line_are_in_chinese(dump_file, admin):
    """Before: "flagged hl:owner:h_2: text not found verbatim in message …", "family read created …",
    "import complete", under --language zh-hans."""
    path = dump_file([msg("owner", "c_00000000000000e2", "user", "我喜欢猫", T),
                      entry("hl:owner:h_2", {"mid": "c_00000000000000e2", "content": "喜欢狗",
                                             "created_at": iso(T), "deleted_at": None})])
    code, text = run("import_kv", path, "--language", "zh-hans")
    assert code == 0, text
    assert "已标记 hl:owner:h_2：在消息 c_00000000000000e2 中找不到一字不差的原文" in text
    assert "类别" in text and "合计" in text and text.rstrip().endswith("导入完成")
    assert words(text, "hl:owner:h_2", "c_00000000000000e2") - {"msg", "hl"} == set(), text
    # The flag stored on the record is the English text, as before (rule 6).
    assert Highlight.objects.get().flagged == "text not found verbatim in message c_00000000000000e2"


def test_the_legacy_import_reads_as_before_without_language(dump_file, admin):
    path = dump_file([msg("owner", "c_00000000000000e2", "user", "I love cats", T),
                      entry("hl:owner:h_2", {"mid": "c_00000000000000e2", "content": "loves dogs",
                                             "created_at": iso(T), "deleted_at": None})])
    code, text = run("import_kv", path, "--dry-run")
    assert "flagged hl:owner:h_2: text not found verbatim in message c_00000000000000e2" in text
    assert text.split("\n")[1].split()[:3] == ["family", "read", "created"]
    assert text.rstrip().endswith("dry run: nothing was written")


# --- import_full ------------------------------------------------------------------------------


def test_import_full_takes_language(tmp_path, admin):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "nope"}))
    code, text = run("import_full", str(bad), "--language", "zh-hans")
    assert code == 1 and "这不是 Previously 的导出文件" in text, text
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"format": "previously-export", "version": 2, "profiles": []}))
    code, text = run("import_full", str(good), "--dry-run", "--language", "zh-hans")
    assert code == 0 and "种类" in text and text.rstrip().endswith("试运行：没有写入任何内容"), text
    assert words(text, *KINDS) == set(), text
    code, text = run("import_full", str(tmp_path / "none.json"), "--language", "zh-hans")
    assert code == 2 and "找不到导出文件" in text
    assert run("import_full", str(good), "--language", "klingon")[0] == 2
    assert run("import_full", str(good), "--dry-run")[1].rstrip().endswith("dry run: nothing was written")


# --- import_history ---------------------------------------------------------------------------


def test_import_history_takes_language(tmp_path, user):
    path = s.chatgpt_zip(tmp_path / "e.zip", [s.chatgpt_conversation()])
    code, text = run("import_history", str(path), "--user", user.username, "--profile", "mia", "--dry-run",
                     "--language", "zh-hans")
    assert code == 0, text
    assert "ChatGPT 导出，1 个对话 -> 伙伴 'mia'（新建）" in text and "候选经历" in text and "试运行" in text, text
    assert "对话" in text.split("\n")[1] and "合计" in text
    code, text = run("import_history", str(path), "--user", user.username, "--profile", "mia", "--language", "zh-hans")
    assert code == 0 and "导入完成：写入 6 条消息" in text, text
    code, text = run("import_history", str(tmp_path / "none.zip"), "--user", user.username, "--language", "zh-hans")
    assert code == 2 and "找不到文件" in text
    code, text = run("import_history", str(path), "--user", user.username, "--profile", "mia", "--dry-run")
    assert "ChatGPT export, 1 conversations -> companion 'mia'" in text and "dry run: nothing was written" in text


# --- card -------------------------------------------------------------------------------------


def test_the_card_command_takes_language(tmp_path, admin):
    path = tmp_path / "card.md"
    path.write_text(SEED_CARD, encoding="utf-8")
    assert run("card", "validate", str(path), "--language", "zh-hans")[1].strip() == f"{path}：有效的 v5 卡片"
    assert "a valid v5 card" in run("card", "validate", str(path))[1]
    code, text = run("card", "validate", str(tmp_path / "none.md"), "--language", "zh-hans")
    assert code == 1 and text.startswith("无法读取"), text
    code, text = run("card", "show", "--profile", "nobody", "--language", "zh-hans")
    assert code == 1
    assert run("card", "validate", str(path), "--language", "klingon")[0] == 2
