"""`manage.py card show|evolve|validate` (K1, K2, K12)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory.models import Card, CardSnapshot
from tests.factories import ProfileFactory, UserFactory
from tests.llm_server import Turn
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import make_slice, set_card


@pytest.fixture
def admin_profile(db):
    admin = UserFactory(username="root", is_superuser=True, is_staff=True)
    return ProfileFactory(user=admin, key="owner")


def run(*args) -> str:
    out = StringIO()
    call_command("card", *args, stdout=out)
    return out.getvalue()


def test_show_prints_the_live_card_of_the_first_superusers_profile(admin_profile):
    set_card(admin_profile, SEED_CARD)
    assert run("show", "--profile", "owner") == SEED_CARD


def test_show_at_a_slice_and_for_a_named_user(admin_profile, profile):
    slice_ = make_slice(profile)
    CardSnapshot.objects.create(profile=profile, slice=slice_, text="# then\n")
    assert run("show", "--profile", "owner", "--user", "alice", "--at", slice_.ref) == "# then\n"
    with pytest.raises(CommandError, match="has no slice 2020/01/01/0000"):
        run("show", "--profile", "owner", "--at", "2020/01/01/0000")
    with pytest.raises(CommandError, match="has no profile 'nobody'"):
        run("show", "--profile", "nobody")


def test_evolve_prints_events_summary_and_diff(admin_profile, llm_server, llm_provider):
    slice_ = make_slice(admin_profile, lines=[("user", "I'm Kai")])
    llm_server.script(
        Turn(tool_calls=[("set_identity", {"field": "Name", "value": "Kai", "refs": [slice_.ref]})]),
        Turn(tool_calls=[("finish", {"summary": "Learned the name Kai."})]),
    )

    out = run("evolve", "--profile", "owner", "--slice", slice_.ref, "--trigger", "explicit")

    assert "] started " in out and "] tool " in out and "] finished " in out
    assert "summary: Learned the name Kai." in out
    assert "+- Name: Kai — refs: [2026/08/17/0515]" in out
    assert "Name: Kai" in Card.objects.get(profile=admin_profile).text


def test_evolve_fails_with_a_non_zero_status(admin_profile, llm_server, llm_provider):
    make_slice(admin_profile, lines=[("user", "hi")])
    llm_server.script(Turn(status=500), Turn(status=500))
    with pytest.raises(CommandError, match="failed: the model server answered 500"):
        run("evolve", "--profile", "owner")


def test_validate_accepts_a_good_card(tmp_path):
    path = tmp_path / "card.md"
    path.write_text(SEED_CARD, encoding="utf-8")
    assert "a valid v5 card" in run("validate", str(path))


def test_validate_reports_every_limit_violation_with_its_line(tmp_path):
    lines = SEED_CARD.split("\n")
    now_at = lines.index("## Now")
    extra = [f"- Hook {k} — refs: [2026/08/11/1426] | since: 2026-08-11" for k in range(5)]
    text = "\n".join(lines[: now_at + 3] + extra + lines[now_at + 3 :])
    text = text.replace("- Red line: no databases", "- Red line: " + "x" * 320 + " no databases")
    path = tmp_path / "card.md"
    path.write_text(text, encoding="utf-8")
    out = StringIO()

    with pytest.raises(CommandError, match="2 violations"):
        call_command("card", "validate", str(path), stdout=out)

    report = out.getvalue()
    fact_line = text.split("\n").index(next(x for x in text.split("\n") if x.startswith("- Red line"))) + 1
    assert f"line {fact_line}: error: Past 2 is 3" in report
    assert f"line {now_at + 1}: error: Now has 6 items, limit 5" in report


def test_validate_reports_a_format_error_with_its_line(tmp_path):
    path = tmp_path / "card.md"
    path.write_text(SEED_CARD.replace("## Horizon", "## Later"), encoding="utf-8")
    out = StringIO()
    with pytest.raises(CommandError, match="1 violation in"):
        call_command("card", "validate", str(path), stdout=out)
    line = SEED_CARD.split("\n").index("## Horizon") + 1
    assert f"line {line}: error: unexpected heading '## Later'" in out.getvalue()
