"""Prompt hygiene (issue 19; SPEC C5, C6, R5, K9): an invalidated experience never reaches the
prompt as current; two active experiences that contradict each other are flagged, not stated."""

from datetime import UTC, datetime, timedelta

import pytest

from memory import consolidation
from memory.archive import archive_message
from memory.curation import link
from previously.chat import prompt
from previously.chat.turn import prepare
from tests.factories import ExperienceFactory, ProfileFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 13, 15, tzinfo=UTC)


def say(profile, n, text, at):
    return archive_message(
        profile=profile, mid=f"c_{n:016x}", speaker="user", content=text, created_at=at, tz="Asia/Shanghai"
    ).message


def system_of(profile, user_message):
    return prepare(profile, user_message, now=user_message.created_at).messages[0]["content"]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_an_invalidated_experience_never_reaches_the_prompt(language):
    profile = ProfileFactory(language=language)
    said = say(profile, 1, "I work at the bakery 面包店", T0 - timedelta(days=9))
    bakery = ExperienceFactory(profile=profile, title="Works at the bakery 面包店", content="bakery job", status="active")
    current = say(profile, 2, "the bakery 面包店 again?", T0)
    assert "bakery job" in system_of(profile, current)

    consolidation.invalidate_experience(
        profile=profile, eid=bakery.eid, stopped_at="2026-02-01", evidence_mids=[said.mid], reason="quit"
    )
    text = system_of(profile, say(profile, 3, "the bakery 面包店 once more", T0 + timedelta(minutes=1)))

    assert "bakery job" not in text


@pytest.mark.parametrize(("language", "heading"), [("en", "# Contradicting experiences"), ("zh", "# 相互矛盾的经历")])
def test_contradicting_active_experiences_are_flagged_not_stated(language, heading):
    profile = ProfileFactory(language=language)
    say(profile, 1, "runs on Wednesdays", T0 - timedelta(days=9))
    wed = ExperienceFactory(profile=profile, title="Runs Wednesdays 🏃", content="running every Wednesday", status="active")
    never = ExperienceFactory(profile=profile, title="Stopped running", content="no more running on Wednesday", status="active")
    ExperienceFactory(profile=profile, title="Running shoes", content="running shoes are blue", status="active")
    current = say(profile, 2, "shall we talk about running on Wednesday?", T0)
    before = system_of(profile, current)
    assert heading not in before

    link(profile=profile, from_item=wed, to_item=never, type="contradicts")
    after = system_of(profile, say(profile, 3, "running on Wednesday again?", T0 + timedelta(minutes=1)))

    confirmed = after.split(prompt.words_for(profile).active, 1)[1].split("\n# ", 1)[0]
    disputed = after.split(heading, 1)[1].split("\n# ", 1)[0]
    assert "running every Wednesday" not in confirmed and "no more running" not in confirmed
    assert "running shoes are blue" in confirmed
    assert "running every Wednesday" in disputed and "no more running on Wednesday" in disputed and "≠" in disputed
    # The stable prefix (constitution, card, safety boundary) is byte-identical (K9).
    prefix = prompt.words_for(profile).safety
    assert before.split(prefix)[0] == after.split(prefix)[0]


def test_a_deleted_contradiction_is_no_longer_flagged():
    profile = ProfileFactory(language="en")
    a = ExperienceFactory(profile=profile, title="Lives in Berlin", content="Berlin flat", status="active")
    b = ExperienceFactory(profile=profile, title="Lives in Lisbon", content="Lisbon flat", status="active")
    relation = link(profile=profile, from_item=a, to_item=b, type="contradicts")
    relation.soft_delete()

    text = system_of(profile, say(profile, 1, "my flat in Berlin or Lisbon?", T0))

    assert "# Contradicting experiences" not in text
    assert "Berlin flat" in text and "Lisbon flat" in text
