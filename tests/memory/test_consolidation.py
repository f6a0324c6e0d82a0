"""The agent's consolidation of experiences (issue 19; SPEC C3-C5): every refusal, the evidence
rules, the hand-edit guard, and history rows naming the run."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from memory import consolidation
from memory.curation import ExperienceRefused, propose_experience
from memory.deletion import hide_message
from memory.models import EvolutionRun, Experience, ExperienceHistory
from tests.factories import MessageFactory, ProfileFactory, SliceFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 8, 17, 9, 0, tzinfo=UTC)


@pytest.fixture
def slice_(profile):
    return SliceFactory(profile=profile, key="2026-08-17-0900", started_at=T0, last_message_at=T0, tz="UTC")


def say(profile, slice_, text, *, speaker="user", at=None, mid=None):
    n = MessageFactory._meta.model.objects.count()
    return MessageFactory(
        profile=profile, slice=slice_, speaker=speaker, content=text, created_at=at or T0 + timedelta(minutes=n),
        mid=mid or (f"c_{n:016x}" if speaker == "user" else f"a_1760000000000_{n:06x}"),
    )


@pytest.fixture
def berlin(profile, slice_):
    m = say(profile, slice_, "I live in Berlin, near the Spree. 我住在柏林。")
    exp = propose_experience(
        profile=profile, title="Lives in Berlin", content="They live in Berlin 柏林", source_mids=[m.mid]
    )
    exp.confirm(actor="agent")
    return exp


@pytest.fixture
def run(profile):
    return EvolutionRun.objects.create(profile=profile, trigger="manual")


def test_invalidate_records_when_it_stopped_and_keeps_the_row(profile, slice_, berlin, run):
    moved = say(profile, slice_, "We moved out of Berlin to Lisbon last week 🏠")

    consolidation.invalidate_experience(
        profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[moved.mid],
        reason="moved to Lisbon", run=run,
    )

    berlin.refresh_from_db()
    assert berlin.invalid_at == datetime(2026, 8, 10, tzinfo=UTC)
    assert Experience.objects.filter(pk=berlin.pk).exists()
    assert moved.mid in berlin.source_mids
    row = berlin.history.order_by("-id").first()
    assert (row.action, row.actor, row.run_id) == ("invalidate", "agent", run.pk)
    assert row.after["evidence_mids"] == [moved.mid]
    assert row.before["invalid_at"] is None
    assert not Experience.objects.valid().filter(pk=berlin.pk).exists()


def test_update_rewords_and_cites_the_new_evidence(profile, slice_, berlin, run):
    m = say(profile, slice_, "Still in Berlin, but now in Kreuzberg")

    consolidation.update_experience(
        profile=profile, eid=berlin.eid, title="Lives in Berlin-Kreuzberg", content="They live in Kreuzberg, Berlin",
        evidence_mids=[m.mid], reason="moved within the city", run=run,
    )

    berlin.refresh_from_db()
    assert berlin.title == "Lives in Berlin-Kreuzberg"
    row = berlin.history.order_by("-id").first()
    assert (row.action, row.actor, row.run_id, row.before["title"]) == ("edit", "agent", run.pk, "Lives in Berlin")


def test_merge_folds_the_duplicate_and_invalidates_it(profile, slice_, berlin, run):
    m = say(profile, slice_, "Berlin is home, I said it twice")
    dup = propose_experience(profile=profile, title="Home is Berlin", content="Berlin home", source_mids=[m.mid])

    keep = consolidation.merge_experiences(
        profile=profile, keep_eid=berlin.eid, merge_eid=dup.eid, title="", content="",
        evidence_mids=[m.mid], reason="same fact", run=run,
    )

    dup.refresh_from_db()
    assert dup.invalid_at is not None and keep.pk == berlin.pk
    assert set(berlin.source_mids) >= {m.mid}
    assert {r.action for r in ExperienceHistory.objects.filter(run=run)} == {"merge", "merged_into"}


def test_confirm_with_evidence_makes_a_candidate_active(profile, slice_, run):
    m = say(profile, slice_, "I run on Wednesdays")
    exp = propose_experience(profile=profile, title="Runs Wednesdays", content="Runs every Wednesday", source_mids=[m.mid])
    again = say(profile, slice_, "yes, Wednesday running is my thing")

    consolidation.confirm_with_evidence(profile=profile, eid=exp.eid, evidence_mids=[again.mid], reason="said again", run=run)

    exp.refresh_from_db()
    assert exp.status == "active"
    assert exp.history.order_by("-id").first().run_id == run.pk


# --- refusals: each names the problem and changes nothing ---


def _unchanged(exp):
    before = (exp.title, exp.content, exp.status, exp.invalid_at, exp.history.count())
    exp.refresh_from_db()
    return before == (exp.title, exp.content, exp.status, exp.invalid_at, exp.history.count())


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"evidence_mids": ["c_ffffffffffffffff"]}, "do not exist"),
        ({"evidence_mids": []}, "at least one"),
        ({"evidence_mids": "c_1"}, "at least one"),
        ({"eid": "exp_nope"}, "no experience"),
        ({"eid": ""}, "by its id"),
        ({"stopped_at": "next tuesday"}, "not YYYY-MM-DD"),
        ({"stopped_at": ""}, "required"),
        ({"stopped_at": "2099-01-01"}, "future"),
    ],
)
def test_invalidate_refusals(profile, slice_, berlin, kwargs, words):
    moved = say(profile, slice_, "We left Berlin")
    args = {"eid": berlin.eid, "stopped_at": "2026-08-10", "evidence_mids": [moved.mid], "reason": "moved"} | kwargs
    with pytest.raises(ExperienceRefused, match=words):
        consolidation.invalidate_experience(profile=profile, **args)
    assert _unchanged(berlin)


def test_evidence_that_does_not_say_so_is_refused(profile, slice_, berlin):
    unrelated = say(profile, slice_, "pizza tonight?")
    with pytest.raises(ExperienceRefused, match="do not say so"):
        consolidation.invalidate_experience(
            profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[unrelated.mid], reason="x"
        )
    assert _unchanged(berlin)


def test_the_companions_words_alone_are_not_evidence(profile, slice_, berlin):
    theirs = say(profile, slice_, "You left Berlin, right?", speaker="assistant")
    with pytest.raises(ExperienceRefused, match="line the person wrote"):
        consolidation.invalidate_experience(
            profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[theirs.mid], reason="x"
        )


def test_a_hidden_or_foreign_message_is_not_evidence(profile, slice_, berlin):
    hidden = say(profile, slice_, "We left Berlin")
    hide_message(hidden)
    other = ProfileFactory(user=profile.user)
    foreign = say(other, SliceFactory(profile=other, key="2026-08-17-0901", started_at=T0, last_message_at=T0), "Berlin no more")
    for mid in (hidden.mid, foreign.mid):
        with pytest.raises(ExperienceRefused, match="do not exist"):
            consolidation.invalidate_experience(
                profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[mid], reason="x"
            )
    assert _unchanged(berlin)


def test_already_invalidated_cannot_be_invalidated_updated_or_confirmed(profile, slice_, berlin):
    m = say(profile, slice_, "We left Berlin")
    consolidation.invalidate_experience(profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[m.mid], reason="x")
    with pytest.raises(ExperienceRefused, match="already invalidated"):
        consolidation.invalidate_experience(profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[m.mid], reason="x")
    with pytest.raises(ExperienceRefused, match="no longer true"):
        consolidation.update_experience(
            profile=profile, eid=berlin.eid, title="Berlin", content="Berlin again", evidence_mids=[m.mid], reason="x"
        )
    with pytest.raises(ExperienceRefused, match="no longer true"):
        consolidation.confirm_with_evidence(profile=profile, eid=berlin.eid, evidence_mids=[m.mid], reason="x")


def test_stopped_before_it_began_is_refused(profile, slice_, berlin):
    berlin.event_time = datetime(2026, 5, 1, tzinfo=UTC)
    berlin.save()
    m = say(profile, slice_, "We left Berlin")
    with pytest.raises(ExperienceRefused, match="before the experience began"):
        consolidation.invalidate_experience(profile=profile, eid=berlin.eid, stopped_at="2026-04-01", evidence_mids=[m.mid], reason="x")


def test_update_refusals(profile, slice_, berlin):
    m = say(profile, slice_, "Berlin still")
    with pytest.raises(ExperienceRefused, match="non-empty title"):
        consolidation.update_experience(profile=profile, eid=berlin.eid, title="", content="x", evidence_mids=[m.mid], reason="")
    with pytest.raises(ExperienceRefused, match="already says exactly that"):
        consolidation.update_experience(
            profile=profile, eid=berlin.eid, title=berlin.title, content=berlin.content, evidence_mids=[m.mid], reason=""
        )
    assert _unchanged(berlin)


def test_merge_refusals(profile, slice_, berlin):
    m = say(profile, slice_, "Berlin")
    with pytest.raises(ExperienceRefused, match="two different"):
        consolidation.merge_experiences(
            profile=profile, keep_eid=berlin.eid, merge_eid=berlin.eid, title="", content="", evidence_mids=[m.mid], reason=""
        )
    berlin.soft_delete()
    dup = propose_experience(profile=profile, title="Berlin", content="Berlin", source_mids=[m.mid])
    with pytest.raises(ExperienceRefused, match="deleted"):
        consolidation.merge_experiences(
            profile=profile, keep_eid=dup.eid, merge_eid=berlin.eid, title="", content="", evidence_mids=[m.mid], reason=""
        )


def test_confirm_refusals(profile, slice_, berlin):
    m = say(profile, slice_, "Berlin")
    with pytest.raises(ExperienceRefused, match="already active"):
        consolidation.confirm_with_evidence(profile=profile, eid=berlin.eid, evidence_mids=[m.mid], reason="")


def test_a_flagged_experience_is_left_to_the_person(profile, slice_, berlin):
    berlin.flagged = "legacy source missing"
    berlin.save()
    m = say(profile, slice_, "Berlin")
    with pytest.raises(ExperienceRefused, match="flagged"):
        consolidation.confirm_with_evidence(profile=profile, eid=berlin.eid, evidence_mids=[m.mid], reason="")


# --- the hand-edit guard ---


@pytest.mark.parametrize("hand", ["edit", "confirm", "reject"])
def test_a_hand_change_binds_the_agent_until_newer_evidence(profile, slice_, berlin, hand):
    old = say(profile, slice_, "We left Berlin for Lisbon")  # T0: older than the hand change
    if hand == "edit":
        berlin.edit(by=profile.user, title="Lives in Berlin (my words)")
    elif hand == "confirm":
        berlin.status = "candidate"
        berlin.save()
        berlin.confirm(by=profile.user)
    else:
        berlin.reject(by=profile.user)

    with pytest.raises(ExperienceRefused, match="by the person .* newer than that"):
        consolidation.invalidate_experience(
            profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[old.mid], reason="moved"
        )
    assert berlin.history.filter(actor="agent", action="invalidate").count() == 0

    newer = say(profile, slice_, "Update: we left Berlin for good", at=timezone.now() + timedelta(seconds=1))
    if hand == "reject":
        with pytest.raises(ExperienceRefused, match="rejected"):
            consolidation.update_experience(
                profile=profile, eid=berlin.eid, title="Left Berlin", content="Left Berlin", evidence_mids=[newer.mid], reason=""
            )
    consolidation.invalidate_experience(
        profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[newer.mid], reason="moved"
    )
    berlin.refresh_from_db()
    assert berlin.invalid_at is not None


def test_an_admin_change_binds_the_agent_too(profile, slice_, berlin):
    old = say(profile, slice_, "Berlin is over")
    berlin.edit(actor="admin", reason="admin fix", content="They live in Berlin (checked)")
    with pytest.raises(ExperienceRefused, match="by an admin"):
        consolidation.update_experience(
            profile=profile, eid=berlin.eid, title="x Berlin", content="Berlin over", evidence_mids=[old.mid], reason=""
        )
