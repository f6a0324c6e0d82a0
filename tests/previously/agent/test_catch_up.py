"""The card catches up on history (SPEC H3, issue 27 point 7), against the scripted model server."""

import io
from datetime import date, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memory.card import parse
from memory.models import Card, CatchUp, EvolutionRun, Message, Slice
from previously.agent import catch_up
from previously.agent.evolve import create_run
from tests.llm_server import Turn
from tests.memory.history import samples as s
from tests.previously.agent.helpers import T0, make_slice

pytestmark = pytest.mark.django_db

WORTH = Turn(content='{"worth": true, "reason": "the person told something about their life"}')


def history(profile, n=3):
    """Up to three imported conversations, a week apart, oldest first."""
    said = [
        ("2026-08-03-0515", 14, "I moved to Lisbon last month for the new job", "How is it going?"),
        ("2026-08-10-0515", 7, "My sister Ana visits me in September", "Lovely!"),
        ("2026-08-17-0515", 0, "I adopted a cat called Pimenta", "What a name!"),
    ]
    return [make_slice(profile, key, at=T0 - timedelta(days=days), lines=[("user", mine), ("assistant", theirs)])
            for key, days, mine, theirs in said[:n]]


def card_for(slice_, text):
    """The model's answer for one slice: worth it, one Now item citing it, finish."""
    return [
        WORTH,
        Turn(tool_calls=[("add_now", {"text": text, "refs": [slice_.ref], "since": f"{slice_.started_at:%Y-%m-%d}"})]),
        Turn(tool_calls=[("finish", {"summary": f"Noted: {text}"})]),
    ]


def test_the_plan_counts_the_runs_and_estimates_calls_and_tokens(profile, llm_provider):
    slices = history(profile)
    make_slice(profile, "2026-08-18-0515", at=T0 + timedelta(days=1), closed=False, lines=[("user", "still talking")])

    found = catch_up.plan(profile)

    assert found.runs == 3 and (found.first, found.last) == (slices[0], slices[-1])  # the open slice waits
    assert found.calls_expected == 3 * catch_up.EXPECTED_CALLS
    assert found.calls_at_most == 3 * (1 + 2 * 12)
    assert found.tokens_expected > 3 * catch_up.EXPECTED_CALLS * 1000  # system prompt and tools alone are >1k tokens
    assert not found.offline


def test_a_slice_without_a_line_of_the_persons_is_a_run_that_costs_no_model_call(profile, llm_server, llm_provider):
    """H3: the estimate counts what the runs will ask; a greeting alone is skipped before any call."""
    slices = history(profile, n=2)
    make_slice(profile, "2026-08-01-0515", at=T0 - timedelta(days=20), lines=[("assistant", "Hello! I am Aria.")])
    talked = catch_up.plan(profile)
    llm_server.script(*card_for(slices[0], "Lives in Lisbon since July"), *card_for(slices[1], "Ana visits in September"))

    assert talked.runs == 3
    assert talked.calls_expected == 2 * catch_up.EXPECTED_CALLS and talked.calls_at_most == 2 * (1 + 2 * 12)
    done = catch_up.run_here(profile)
    assert (done.planned, done.done) == (3, 3)
    assert EvolutionRun.objects.filter(profile=profile, status=EvolutionRun.Status.SKIPPED).count() == 1
    assert len(llm_server.requests) == 6  # the two slices' three calls each, none for the greeting


def test_the_catch_up_builds_the_card_oldest_first_with_refs_to_each_slice(profile, llm_server, llm_provider):
    slices = history(profile)
    llm_server.script(*card_for(slices[0], "Lives in Lisbon since July"), *card_for(slices[1], "Ana visits in September"),
                      *card_for(slices[2], "Has a cat, Pimenta"))

    done = catch_up.run_here(profile)

    assert done.status == CatchUp.Status.FINISHED and (done.planned, done.done, done.failed) == (3, 3, 0)
    runs = list(EvolutionRun.objects.filter(profile=profile).order_by("created_at", "id"))
    assert [(r.slice_id, r.trigger, r.status) for r in runs] == [
        (s.pk, EvolutionRun.Trigger.CATCH_UP, EvolutionRun.Status.CHANGED) for s in slices]
    card = parse(Card.objects.get(profile=profile).text)
    assert [(n.text, n.refs) for n in card.now] == [
        ("Lives in Lisbon since July", (slices[0].ref,)), ("Ana visits in September", (slices[1].ref,)),
        ("Has a cat, Pimenta", (slices[2].ref,))]
    # The agent was told it is catching up, and read each slice in turn, oldest first.
    briefings = [r["messages"][1]["content"] for r in llm_server.requests if r.get("tools")]
    firsts = list(dict.fromkeys(b for b in briefings if b.startswith("Trigger: catching up")))
    assert len(firsts) == 3
    assert "Lisbon" in firsts[0] and "Ana" in firsts[1] and "Pimenta" in firsts[2]


def test_it_stops_when_asked_and_resumes_skipping_what_it_already_read(profile, llm_server, llm_provider):
    slices = history(profile)
    llm_server.script(*card_for(slices[0], "Lives in Lisbon since July"))
    running = catch_up.begin(profile)
    catch_up.step(running.pk)

    catch_up.stop(profile)
    assert catch_up.step(running.pk) is None
    running.refresh_from_db()
    assert running.status == CatchUp.Status.STOPPED and running.done == 1

    assert catch_up.plan(profile).runs == 2  # the first slice is evolved now
    llm_server.script(*card_for(slices[1], "Ana visits in September"), *card_for(slices[2], "Has a cat, Pimenta"))
    resumed = catch_up.run_here(profile)
    assert resumed.status == CatchUp.Status.FINISHED and resumed.planned == 2 and resumed.done == 2
    assert EvolutionRun.objects.filter(slice=slices[0]).count() == 1
    assert catch_up.plan(profile).runs == 0


def test_slices_the_card_already_evolved_or_judged_not_worth_it_are_skipped(profile, llm_provider):
    slices = history(profile)
    create_run(profile=profile, slice_=slices[0], trigger=EvolutionRun.Trigger.SLICE_CLOSE)  # queued: in progress
    EvolutionRun.objects.create(profile=profile, slice=slices[1], trigger="slice_close", status="skipped",
                                skip_reason="nothing worth keeping")
    EvolutionRun.objects.create(profile=profile, slice=slices[2], trigger="slice_close", status="skipped",
                                skip_reason="no model configured")

    assert list(catch_up.pending(profile)) == [slices[2]]


def test_since_and_max_slices_bound_the_catch_up(profile, llm_server, llm_provider):
    slices = history(profile)

    assert catch_up.plan(profile, since=date(2026, 8, 10)).runs == 2
    llm_server.script(*card_for(slices[1], "Ana visits in September"))
    done = catch_up.run_here(profile, since=date(2026, 8, 10), max_slices=1)
    assert done.done == 1 and [r.slice_id for r in EvolutionRun.objects.all()] == [slices[1].pk]


def test_a_failed_run_is_counted_and_the_catch_up_goes_on(profile, llm_server, llm_provider):
    slices = history(profile, 2)
    llm_server.script(WORTH, Turn(status=500), *card_for(slices[1], "Ana visits in September"))

    done = catch_up.run_here(profile)

    assert (done.status, done.done, done.failed) == (CatchUp.Status.FINISHED, 1, 1)


def test_with_no_model_it_says_so_and_runs_nothing(profile):
    history(profile)

    with pytest.raises(catch_up.NoModel):
        catch_up.begin(profile)
    with pytest.raises(CommandError, match="no model is configured"):
        call_command("card", "catch_up", "--profile", "owner", "--user", "alice", stdout=io.StringIO())
    assert not CatchUp.objects.exists() and not EvolutionRun.objects.exists()


def test_the_command_shows_the_estimate_first_then_runs(profile, llm_server, llm_provider):
    slices = history(profile, 1)
    out = io.StringIO()
    call_command("card", "catch_up", "--profile", "owner", "--user", "alice", "--dry-run", stdout=out)
    assert out.getvalue().startswith(f"1 run (slices {slices[0].ref} … {slices[0].ref}); about 4 model calls (at most 25)")
    assert not EvolutionRun.objects.exists()

    llm_server.script(*card_for(slices[0], "Lives in Lisbon since July"))
    out = io.StringIO()
    call_command("card", "catch_up", "--profile", "owner", "--user", "alice", stdout=out)
    assert f"[1/1] {slices[0].ref} changed: Noted: Lives in Lisbon since July" in out.getvalue()
    assert "catch-up finished: 1 runs done, 0 failed" in out.getvalue()


def test_the_page_task_steps_through_every_slice_on_the_immediate_backend(profile, llm_server, llm_provider):
    slices = history(profile)
    llm_server.script(*card_for(slices[0], "A"), *card_for(slices[1], "B"), *card_for(slices[2], "C"))

    started = catch_up.start(profile)

    started.refresh_from_db()
    assert started.status == CatchUp.Status.FINISHED and started.done == 3
    assert Message.objects.filter(profile=profile).count() == 6  # nothing archived by the catch-up


def test_a_catch_up_whose_process_died_stops_at_the_first_press(profile, llm_provider):
    history(profile, 1)
    dead = catch_up.begin(profile)  # recorded running, but no step is under way

    catch_up.stop(profile)

    dead.refresh_from_db()
    assert dead.status == CatchUp.Status.STOPPED and catch_up.active(profile) is None


def test_the_catch_up_reads_the_slices_an_import_history_run_made_oldest_first(profile, llm_server, llm_provider,
                                                                               tmp_path):
    """Issue 27 audit point 7: not hand-made slices, but those `import_history` writes (closed,
    reason import, each conversation's segments apart)."""
    convs = [s.chatgpt_conversation(cid="later", title="Later", t0=s.T0 + 86400),
             s.chatgpt_conversation(cid="first", title="First", t0=s.T0)]  # the export lists the newer first
    call_command("import_history", str(s.chatgpt_zip(tmp_path / "export.zip", convs)), "--user", "alice",
                 "--profile", "owner", stdout=io.StringIO(), stderr=io.StringIO())
    imported = list(Slice.objects.filter(profile=profile).order_by("started_at"))
    # Each conversation: its talk, then four hours later a segment of one assistant code line.
    assert len(imported) == 4 and {x.close_reason for x in imported} == {Slice.CloseReason.IMPORT}
    assert catch_up.plan(profile).runs == 4
    talks = [imported[0], imported[2]]
    llm_server.script(*card_for(talks[0], "Plans a weekend in Hangzhou"), *card_for(talks[1], "Asked about Hangzhou again"))

    done = catch_up.run_here(profile)

    assert (done.status, done.done, done.failed) == (CatchUp.Status.FINISHED, 4, 0)
    runs = list(EvolutionRun.objects.filter(profile=profile).order_by("created_at", "id"))
    assert [(r.slice_id, r.trigger, r.status, r.skip_reason) for r in runs] == [
        (x.pk, EvolutionRun.Trigger.CATCH_UP, *outcome) for x, outcome in zip(imported, [
            (EvolutionRun.Status.CHANGED, ""), (EvolutionRun.Status.SKIPPED, "nothing worth keeping"),
            (EvolutionRun.Status.CHANGED, ""), (EvolutionRun.Status.SKIPPED, "nothing worth keeping")], strict=True)]
    card = parse(Card.objects.get(profile=profile).text)
    assert [(n.text, n.refs) for n in card.now] == [
        ("Plans a weekend in Hangzhou", (talks[0].ref,)), ("Asked about Hangzhou again", (talks[1].ref,))]
    briefings = list(dict.fromkeys(r["messages"][1]["content"] for r in llm_server.requests
                                   if r.get("tools") and r["messages"][1]["content"].startswith("Trigger: catching up")))
    assert len(briefings) == 2 and all("周末想去杭州" in b for b in briefings)
    assert talks[0].ref in briefings[0] and talks[1].ref in briefings[1]
    assert catch_up.plan(profile).runs == 0
