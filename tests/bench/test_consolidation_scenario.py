"""Issue 19, point 4: the 30-slice scenario with facts that change (bench/consolidation.py)."""

import pytest

from bench.consolidation import SCRIPT, TRUE_AT_END, prompt_sections, run
from memory.models import ExperienceHistory
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db


def test_with_consolidation_only_what_is_true_at_the_end_stays_active_with_its_evidence_chain():
    profile = ProfileFactory(language="en")

    result = run(profile=profile)

    assert len(SCRIPT) == 30
    assert result["superseded_facts"] == 5 and result["superseded_left_valid"] == []
    assert set(result["true_at_end_active"]) == {f"{t}: {v}" for t, v in TRUE_AT_END} - {"Trip: Iceland"}
    assert result["active"] == result["active_with_evidence_chain"] == 5
    assert result["refused_tool_calls"] == 0
    for row in ExperienceHistory.objects.filter(experience__profile=profile, action="invalidate"):
        assert (row.actor, row.run_id is not None, bool(row.after["evidence_mids"])) == ("agent", True, True)
    sections = prompt_sections(profile)
    assert "Lisbon" in sections and "Berlin, near the Spree" not in sections and "Wednesdays before work" not in sections


def test_the_agent_before_issue_19_leaves_every_superseded_fact_standing():
    profile = ProfileFactory(language="en")

    result = run(profile=profile, baseline=True)

    assert len(result["superseded_left_valid"]) == result["superseded_facts"] == 5
    assert result["active"] == 0
    assert "Wednesdays before work" in prompt_sections(profile)
