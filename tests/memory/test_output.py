"""What long commands print (SPEC X5, issue 19): one table printer, one progress display."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import OutputWrapper
from rich.cells import cell_len

from memory.management import output
from tests.factories import MessageFactory, ProfileFactory


def test_the_table_aligns_text_left_numbers_right_with_a_total_row_in_any_script():
    text = output.table(["kind", "selected"], [["messages 消息", 12], ["emoji 🐱", 3]], total=["total", 15])
    lines = text.splitlines()
    assert lines[0].split() == ["kind", "selected"]
    assert any(line.startswith("messages 消息") and line.endswith("12") for line in lines)
    assert any(line.startswith("emoji 🐱") and line.endswith(" 3") for line in lines)
    assert lines[-1].startswith("total") and lines[-1].endswith("15")
    # the number column ends in the same screen column on every row (CJK and emoji are wide)
    assert len({cell_len(line) for line in lines if line.rstrip()[-1:].isdigit()}) == 1


def test_progress_off_a_terminal_writes_each_finished_stage_once():
    buffer = io.StringIO()
    with output.progress(OutputWrapper(buffer)) as progress:
        for done in range(1, 4):
            progress("writing", done, 3)
        progress("writing", 3, 3)
        progress("reading", 5, 0)  # total unknown: nothing to say yet
    assert buffer.getvalue().splitlines() == ["  writing: 3/3"]


def test_counted_reports_every_n_items_and_at_the_end():
    seen = []
    items = list(output.counted(range(5), lambda *a: seen.append(a), "keys", every=2))
    assert items == [0, 1, 2, 3, 4]
    assert seen == [("keys", 2, 0), ("keys", 4, 0), ("keys", 5, 5)]


@pytest.mark.django_db
def test_export_and_import_full_show_progress_and_end_with_a_summary_table(tmp_path, admin_user):
    profile = ProfileFactory(user=admin_user, key="owner")
    MessageFactory(profile=profile, content="你好 🌱")
    path = tmp_path / "export.json"
    err = io.StringIO()
    call_command("export_full", "--output", str(path), stderr=err)
    assert "profiles: 1/1" in err.getvalue()
    assert [line.split() for line in err.getvalue().splitlines()][-3:] == [
        ["profiles", "1"], ["messages", "1"], ["image", "files", "0"]]
    assert json.loads(path.read_text())["profiles"][0]["key"] == "owner"

    out, err = io.StringIO(), io.StringIO()
    call_command("import_full", str(path), "--dry-run", "--user", admin_user.username, stdout=out, stderr=err)
    assert "profiles: 1/1" in err.getvalue()
    rows = {line.split()[0]: line.split()[1:] for line in out.getvalue().splitlines() if line.strip()}
    assert rows["kind"] == ["read", "created", "existing", "tombstoned"]
    assert rows["messages"] == ["1", "0", "1", "0"]
