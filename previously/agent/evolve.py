"""The Previously Agent (K3, K7, K8, K10, K11): a tool-calling loop that edits the card.

`previously.agent.lifecycle` starts runs (records one and queues `evolve_card`);
`execute_run` is that task's body: (slice-close runs) the analyzer's "worth it?" gate,
then the loop — the model sees the card with its usage and flags and the slice, proposes tool calls, each goes
through `memory.card` and its result (accepted, or the refusal text) goes back as the
tool message — until `finish` or the step limit. The accepted calls are committed in one
transaction with the slice snapshot (`memory.card.store.commit_card`), only on a real change.
Nothing touches the live card before that commit, so a run that dies mid-way leaves the
card as it was and is marked failed.
"""

import json
import logging
import time

from django.conf import settings
from django.tasks import task
from django.utils import timezone
from django.utils.translation import gettext_noop

from memory.card import Card, detect_format, flags, render, usage
from memory.card.store import (
    commit_card,
    line_diff,
    live_card,
    parse_or_empty,
    refresh_injected_card,
    refs_resolver,
)
from memory.clock import local_clock
from memory.models import EvolutionRun, Profile, Slice
from memory.phrases import as_data, say
from memory.recall import experiences_for_review
from memory.recall.budget import approx_tokens
from memory.rewrite_guard import person_changes
from previously.agent import tools
from previously.agent.analyzer import worth_evolving
from previously.agent.events import emit
from previously.llm import Provider, ProviderError
from previously.llm.select import agent_model, context_tokens, output_cap, provider_for

log = logging.getLogger(__name__)

NO_MODEL = "no model configured"
# Issue 26 point 3: a model that answers with text instead of tool calls is nudged once.
NUDGE = (
    "You answered with text, but this run only acts through tool calls. Call the tools now; "
    "when nothing needs to change, call finish with a one-sentence summary."
)
# The nudge's line in the run's log, as a person reads it (the model gets NUDGE itself).
NUDGED = gettext_noop("refused: no tool call — the model answered with text and was asked once to use the tools")
NO_TOOLS = (
    "this model does not use tools: it answered twice with plain text instead of tool calls. "
    "Choose another model for the agent (PREVIOUSLY_AGENT_MODEL, or the companion's settings)."
)
NOTHING_WORTH_KEEPING = "nothing worth keeping"
ANALYZER_FAILED = "analyzer failed — ran anyway"
RECENT_SLICES = 12
# Runs that ask the analyzer first whether their slice is worth it: a slice that just closed, and
# each slice of a catch-up over history (H3), which may be small talk too.
GATED_TRIGGERS = (EvolutionRun.Trigger.SLICE_CLOSE, EvolutionRun.Trigger.CATCH_UP)

SYSTEM_PROMPT = """You are the Previously Agent. You maintain the "Previously On" card: a compact \
Markdown briefing about one person that their companion reads before every conversation.

The card has five sections:
- Identity: Name, Address them as, Pronouns, Alias… (at most 8 lines).
- Past: one third-person portrait paragraph (at most 2400 characters), plus at most 8 anchor \
facts — dates, decisions, red lines that will almost certainly still hold in three years.
- Now: at most 5 hooks about the current state, each with a since date.
- Horizon: commitments, deadlines, awaited replies, each with a by date. They never expire; \
only resolve_horizon removes one.
- Self-model: at most 10 lessons on how to work with this person — deltas on the companion's \
core directives, never restatements of them.

Rules:
- You never rewrite the card whole. Edit it only with the tools; every tool validates and \
answers "accepted: …" or "refused: …" with the reason. After a refusal, fix the call and retry, \
or drop it.
- Evidence is required: refs are slice ids like 2026/08/11/1426 (no brackets) of slices that \
exist. Use read_slice to read a slice, read_card_at to see the card as it was then.
- Keep only what really matters; correct what is wrong; write in the person's own language.
- Flagged items need a decision: a stale Now item is promoted (promote_now) or dropped \
(remove_now); an overdue Horizon item stays until the person says how it went.
- When you are done — including when nothing needs to change — call finish with one sentence \
saying what changed and why."""


REVIEW_PROMPT = """You are the Previously Agent, keeping one person's experiences current. \
Experiences are events and facts of their life, each citing the messages it rests on.

For each experience listed, decide from the slice's transcript: nothing (most often), \
update_experience (still true, changed in detail), merge_experiences (two say the same), \
invalidate_experience (no longer true: give stopped_at, when it stopped), or confirm_with_evidence \
(a candidate the person has now plainly confirmed). Add what is new with propose_experience. \
Every change cites evidence_mids: ids of lines where the person says so, as shown (c_…). \
Never invalidate what is still true; when unsure, do nothing. A refusal says why: fix the call \
or drop it. End with finish(summary)."""


def max_steps() -> int:
    return settings.PREVIOUSLY_AGENT_MAX_STEPS


class OverBudget(Exception):
    """The run outlived PREVIOUSLY_AGENT_RUN_SECONDS."""


class NoTools(ProviderError):
    """The model answered with plain text again after the nudge: it does not use tools."""


# --- recording a run (lifecycle starts them) ----------------------------------------------


def create_run(
    *, profile: Profile, slice_: Slice | None, trigger: str, note: str = "", request: str = ""
) -> EvolutionRun:
    steps = []
    if note:
        steps.append({"at": timezone.now().isoformat(), "event": "note", "note": note})
    if request:
        steps.append({"at": timezone.now().isoformat(), "event": "request", "text": request[:1000]})
    return EvolutionRun.objects.create(profile=profile, slice=slice_, trigger=trigger, steps=steps)


def skip_run(run: EvolutionRun, reason: str) -> EvolutionRun:
    """A run that will not happen is recorded and reported with its reason, never dropped."""
    run.status = EvolutionRun.Status.SKIPPED
    run.skip_reason = reason
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "skip_reason", "finished_at"])
    emit(run, "skipped", reason=reason, note=_note(run))
    return run


def _note(run: EvolutionRun) -> str:
    return "; ".join(s["note"] for s in run.steps if s.get("event") == "note")


def _request(run: EvolutionRun) -> str:
    return next((s["text"] for s in run.steps if s.get("event") == "request"), "")


# --- the task body ---------------------------------------------------------------------------


@task()
def evolve_card(run_id: int) -> str:
    """The task that carries out one queued run (`lifecycle.start_run` queues it); returns its
    final status."""
    return execute_run(run_id).status



def execute_run(run_id: int, *, provider: Provider | None = None) -> EvolutionRun:
    """Carry out one queued run to its end: skipped, changed, unchanged or failed."""
    # Claim the run: a re-delivered task (or a second worker) finds it taken and stops.
    claimed = EvolutionRun.objects.filter(pk=run_id, status=EvolutionRun.Status.QUEUED).update(
        status=EvolutionRun.Status.RUNNING, started_at=timezone.now()
    )
    run = EvolutionRun.objects.select_related("profile", "slice").get(pk=run_id)
    if not claimed:
        return run
    provider = provider or provider_for(run.profile)
    if provider.offline:
        return skip_run(run, NO_MODEL)
    if run.trigger in GATED_TRIGGERS and run.slice is not None:
        verdict = worth_evolving(run.slice, provider=provider)
        if verdict.failed:
            run.steps = [*run.steps, {"at": timezone.now().isoformat(), "event": "note", "note": ANALYZER_FAILED}]
            run.save(update_fields=["steps"])
        elif not verdict.worth:
            return skip_run(run, NOTHING_WORTH_KEEPING)
    row = live_card(run.profile)
    run.attempts += 1
    run.model_name = agent_model(run.profile)
    run.card_before = row.text
    run.save(update_fields=["attempts", "model_name", "card_before"])
    emit(run, "started", trigger=run.trigger, note=_note(run))
    deadline = time.monotonic() + settings.PREVIOUSLY_AGENT_RUN_SECONDS
    changes: list[str] = []  # the experience changes, kept even when the run fails
    try:
        ctx = tools.Context(
            profile=run.profile,
            card=parse_or_empty(row.text),
            refs_exist=refs_resolver(run.profile),
            run=run,
            offered=tools.CARD_PHASE,
            experience_changes=changes,
        )
        steps_used = _loop(run, ctx, provider, deadline=deadline)
        commit = commit_card(
            profile=run.profile,
            base_version=row.version,
            base_text=row.text,
            mutations=ctx.accepted,
            slice_=run.slice,
            run=run,
        )
    except OverBudget as exc:
        return _fail(run, str(exc), retry=True, changes=changes)
    except NoTools as exc:
        log.info("evolution run %s: %s", run.pk, exc)
        return _fail(run, str(exc), changes=changes)
    except Exception as exc:  # noqa: BLE001 - any failure leaves the card as it was
        log.warning("evolution run %s failed: %s", run.pk, exc, exc_info=not isinstance(exc, ProviderError))
        return _fail(run, str(exc) or type(exc).__name__, changes=changes)
    # The summary is the model's `finish` call's only; its free text never is (issue 26).
    card_summary = ctx.summary or (
        f"stopped after {steps_used} model calls without finishing"
        if steps_used >= max_steps()
        else "the agent ended without a summary"
    )
    review_note = _review(run, ctx, provider, deadline=deadline)
    changed = commit.changed or bool(ctx.experience_changes)
    run.card_after = commit.text
    run.status = EvolutionRun.Status.CHANGED if changed else EvolutionRun.Status.UNCHANGED
    run.diff = experience_diff(line_diff(run.card_before, commit.text) if commit.changed else "", ctx.experience_changes)
    run.summary = card_summary + (f" Experiences: {review_note}" if review_note else "")
    run.finished_at = timezone.now()
    run.save(update_fields=["card_after", "status", "diff", "summary", "finished_at"])
    emit(
        run,
        "finished",
        changed=commit.changed,
        summary=run.summary,
        rebased=commit.rebased,
        dropped=commit.dropped,
        note=_note(run),
    )
    if commit.changed and run.trigger == EvolutionRun.Trigger.EXPLICIT and run.slice and run.slice.is_open:
        refresh_injected_card(run.slice, reason=f"explicit memory request (run {run.pk})")
    return run


RETRIES = 1  # a run over its budget is queued again once, then left failed


def _fail(run: EvolutionRun, error: str, *, retry: bool = False, changes: list[str] = ()) -> EvolutionRun:
    """Mark the run failed with its reason (the card is untouched); an over-budget run is queued
    once more. Experience changes already made stay, and are listed in the diff."""
    run.status = EvolutionRun.Status.FAILED
    run.error = error[:2000]
    run.diff = experience_diff("", list(changes))
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "diff", "finished_at"])
    emit(run, "failed", error=run.error)
    retried = sum(1 for s in run.steps if s.get("event") == "retry")
    if retry and retried < RETRIES:
        run.steps = [*run.steps, {"at": timezone.now().isoformat(), "event": "retry", "attempts": run.attempts}]
        run.status, run.error, run.finished_at = EvolutionRun.Status.QUEUED, "", None
        run.save(update_fields=["steps", "status", "error", "finished_at"])
        evolve_card.enqueue(run.pk)
        run.refresh_from_db()
    return run


def experience_diff(card_diff: str, changes: list[str]) -> str:
    """The run's diff: the card's line diff, then one line per experience change."""
    if not changes:
        return card_diff
    block = "experiences:\n" + "\n".join(changes)
    return f"{card_diff.rstrip()}\n\n{block}" if card_diff.strip() else block


# --- the experience review (issue 19) -----------------------------------------------------------


def _review(run: EvolutionRun, ctx: tools.Context, provider: Provider, *, deadline: float) -> str:
    """After the card, on a closed slice: the agent reviews the experiences recall picks (sharing
    sources or words with the slice) and keeps them current. Returns a note for the summary; a
    failure here leaves the card commit standing and is named in the note."""
    slice_ = run.slice
    if slice_ is None or slice_.is_open:
        return _changes_note(ctx)
    picked = experiences_for_review(slice_)
    if not picked:
        return _changes_note(ctx)
    emit(run, "review", experiences=[e.eid for e in picked])
    review = tools.Context(
        profile=run.profile, card=ctx.card, refs_exist=ctx.refs_exist, run=run, offered=tools.EXPERIENCE_PHASE,
        experience_changes=ctx.experience_changes,
    )
    messages = [
        {"role": "system", "content": REVIEW_PROMPT},
        {"role": "user", "content": review_briefing(slice_, picked)},
    ]
    try:
        _loop(run, review, provider, deadline=deadline, messages=messages)
    except Exception as exc:  # noqa: BLE001 - the card is committed; the review's failure is reported
        log.warning("experience review of run %s failed: %s", run.pk, exc)
        return _changes_note(ctx) + f" (review stopped: {exc})"
    return _changes_note(ctx) or (review.summary or "")


def _changes_note(ctx: tools.Context) -> str:
    if not ctx.experience_changes:
        return ""
    counts: dict[str, int] = {}
    words = {"+": "added", "~": "updated", "⇐": "merged", "-": "invalidated", "✓": "confirmed"}
    for line in ctx.experience_changes:
        word = words.get(line.split(" ", 1)[0], "changed")
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{n} {w}" for w, n in counts.items()) + "."


def review_briefing(slice_: Slice, picked: list) -> str:
    """The review's first user message: the picked experiences with their history, the slice."""
    lines = []
    for e in picked:
        since = f", since {e.event_time:%Y-%m-%d}" if e.event_time else ""
        lines.append(f"- {e.eid} [{e.status}{since}] {e.title}: {e.content} (sources: {', '.join(e.source_mids)})")
    return "\n\n".join(
        [
            "Experiences to review (picked because they share words or sources with the slice):\n"
            + "\n".join(lines),
            f"Transcript of slice {slice_.ref}:\n" + tools.transcript(slice_),
            "Decide for each, then call finish(summary).",
        ]
    )


# --- the loop ---------------------------------------------------------------------------------


def _loop(
    run: EvolutionRun, ctx: tools.Context, provider: Provider, *, deadline: float, messages: list[dict] | None = None
) -> int:
    """Model calls until `finish`, a reply without tool calls, the step limit or the time budget."""
    offered = tools.schemas(ctx.offered)
    if messages is None:
        window = context_tokens(provider)
        messages, offered, left_out = fit_request(briefing_parts(run, ctx.card), offered, window=window)
        if left_out:
            _log_fit(run, left_out, window)
    model = agent_model(run.profile)
    limit = max_steps()
    nudged = False
    for step in range(1, limit + 1):
        if time.monotonic() > deadline:
            raise OverBudget(
                f"over its time budget of {settings.PREVIOUSLY_AGENT_RUN_SECONDS} s after {step - 1} model calls"
                " (PREVIOUSLY_AGENT_RUN_SECONDS)"
            )
        if step > 1 and _shorten_history(messages, offered, window=context_tokens(provider)):
            _log_fit(run, ["older tool results"], context_tokens(provider))
        completion = provider.complete(messages, tools=offered, model=model, max_tokens=output_cap("agent"))
        if not completion.tool_calls:
            if nudged:
                raise NoTools(NO_TOOLS)
            nudged = True
            emit(run, "tool", tool="(text)", arguments="", accepted=False,
                 result=f"refused: no tool call — {NUDGE}", said=as_data(say(NUDGED)), step=step)
            messages.append({"role": "assistant", "content": completion.content or ""})
            messages.append({"role": "user", "content": NUDGE})
            continue
        messages.append(
            {
                "role": "assistant",
                "content": completion.content or None,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in completion.tool_calls
                ],
            }
        )
        finished = False
        for call in completion.tool_calls:
            if finished:
                outcome = tools.Outcome(False, say(gettext_noop("ignored: the run already finished")))
            else:
                outcome = tools.dispatch(ctx, call.name, call.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.message})
            emit(
                run,
                "tool",
                tool=call.name,
                arguments=call.arguments[:2000],
                accepted=outcome.accepted,
                result=outcome.message[:1000],
                said=as_data(outcome.message),  # to show it in the reader's language
                step=step,
            )
            finished = finished or outcome.finished
        if finished:
            return step
    return limit


# --- fitting the request into the model's window (issue 26 point 4) -------------------------

# What may be left out of the first request, in order: recall-like context first (the other
# slices to cite, the older part of the transcript, the person's edit history), then the tool
# schemas' descriptions, last whole tools (finish and the card mutations stay). The card, its
# usage and flags, the trigger and the instructions always stay.
TRIMMABLE = ("recent", "transcript", "changes")
KEPT_TOOLS = ("finish",)
FIT_MARGIN = 1.15  # approx_tokens against a real tokenizer (SmolLM2's BPE counts ~10% more)


def request_tokens(messages: list[dict], offered: list[dict]) -> int:
    """The request's size in approx_tokens (memory/recall/budget.py), with a margin."""
    text = "".join(str(m.get("content") or "") for m in messages) + json.dumps(offered)
    return int(approx_tokens(text) * FIT_MARGIN) + 8 * len(messages)


def fit_request(
    parts: list[tuple[str, str]], offered: list[dict], *, window: int | None
) -> tuple[list[dict], list[dict], list[str]]:
    """The first request (system prompt + briefing from `parts`) and the tools, trimmed to
    `window` minus the step's output cap; with the list of what was left out."""
    parts = list(parts)
    left_out: list[str] = []

    def request() -> list[dict]:
        text = "\n\n".join(t for _, t in parts if t)
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]

    if not window:
        return request(), offered, left_out
    budget = window - output_cap("agent")

    def fits() -> bool:
        return request_tokens(request(), offered) <= budget

    for key in TRIMMABLE:
        if fits():
            break
        for i, (k, text) in enumerate(parts):
            if k != key or not text:
                continue
            if key == "transcript":
                over = request_tokens(request(), offered) - budget
                keep = max(0, len(text) - over * 4 - 200)
                head = text.split("\n", 1)[0]
                body = text[len(head):]
                parts[i] = (k, head + "\n[… older lines left out to fit the model's window …]" + body[len(body) - keep:])
                left_out.append(f"the transcript's older part ({len(body) - keep} of {len(body)} characters)")
            else:
                parts[i] = (k, "")
                left_out.append({"recent": "the list of other slices", "changes": "the person's card edits"}[key])
    if not fits():
        offered = [{"type": "function", "function": {k: v for k, v in t["function"].items() if k != "description"}}
                   for t in offered]
        left_out.append("the tools' descriptions")
    while not fits() and len(offered) > len(KEPT_TOOLS):
        dropped = next((t for t in reversed(offered) if t["function"]["name"] not in KEPT_TOOLS), None)
        if dropped is None:
            break
        offered = [t for t in offered if t is not dropped]
        left_out.append(f"the tool {dropped['function']['name']}")
    if not fits():
        left_out.append(f"still over the window of {window} tokens: the server may refuse the request")
    return request(), offered, left_out


SHORTENED = "[left out to fit the model's window]"


def _shorten_history(messages: list[dict], offered: list[dict], *, window: int | None) -> bool:
    """Later steps: the oldest tool results give way (oldest first) when the conversation
    outgrows the window; True when something was left out."""
    if not window:
        return False
    budget = window - output_cap("agent")
    shortened = False
    for message in messages:
        if request_tokens(messages, offered) <= budget:
            break
        if message["role"] == "tool" and message["content"] != SHORTENED and len(message["content"]) > len(SHORTENED):
            message["content"] = SHORTENED
            shortened = True
    return shortened


def _log_fit(run: EvolutionRun, left_out: list[str], window: int | None) -> None:
    """The run log says what the first request left out to fit the window."""
    note = f"left out to fit the model's window of {window} tokens: " + "; ".join(left_out)
    run.steps = [*run.steps, {"at": timezone.now().isoformat(), "event": "fitted", "note": note}]
    run.save(update_fields=["steps"])
    log.info("evolution run %s: %s", run.pk, note)


def briefing(run: EvolutionRun, card: Card) -> str:
    """The run's first user message: trigger, date, card with usage and flags, the slice."""
    return "\n\n".join(text for _, text in briefing_parts(run, card) if text)


def briefing_parts(run: EvolutionRun, card: Card) -> list[tuple[str, str]]:
    """The briefing's parts, keyed so `fit_request` can leave some out."""
    profile = run.profile
    tz = run.slice.tz if run.slice else "UTC"
    today = local_clock(timezone.now(), tz).local.date()
    stored = live_card(profile).text
    parts = [("trigger", f"Trigger: {_trigger_line(run)}"), ("today", f"Today (the person's local date): {today.isoformat()}")]
    note = _note(run)
    if note:
        parts.append(("note", f"Note: {note}"))
    changes = person_changes(profile)
    if changes:
        parts.append(("changes",
            "The person's own changes to the card — respect them; the tools refuse to undo them "
            "without a newer conversation in refs:\n"
            + "\n".join(f"- {c.at:%Y-%m-%d} {c.kind} ({c.section}{' portrait' if c.part else ''}): {c.words}"
                        for c in changes)
        ))
    parts.append(("usage", "Card usage:\n" + usage(card)))
    found = flags(card, today=today)
    parts.append(("flags", "Flagged items:\n" + ("\n".join(f"- {f.message}" for f in found) if found else "(none)")))
    if detect_format(stored) == "legacy":
        parts.append(("card",
            "The stored card is in an older format and cannot be edited in place. Rebuild it in "
            "the v5 sections with the tools (you start from an empty card); keep what still "
            "matters, with refs to existing slices. The old card:\n<<<\n" + stored + "\n>>>"
        ))
    else:
        body = render(card) if stored.strip() else "(empty card — nothing recorded yet)"
        parts.append(("card", "Current card:\n" + body))
    recent = (
        profile.slices.order_by("-started_at").values_list("key", flat=True)[:RECENT_SLICES]
    )
    parts.append((
        "recent",
        "Recent slices you may cite (newest first): " + (", ".join(k.replace("-", "/") for k in recent) or "(none)"),
    ))
    if run.slice is not None:
        parts.append((
            "transcript",
            f"Transcript of slice {run.slice.ref} (read_slice for any other):\n" + tools.transcript(run.slice),
        ))
    parts.append(("end", "Edit the card with the tools, then call finish(summary)."))
    return parts


def _trigger_line(run: EvolutionRun) -> str:
    ref = run.slice.ref if run.slice else "—"
    if run.trigger == EvolutionRun.Trigger.EXPLICIT:
        asked = _request(run)
        said = f': "{asked}"' if asked else ""
        return f"an explicit memory request or correction during slice {ref}{said} — act on it now."
    if run.trigger == EvolutionRun.Trigger.MIGRATION:
        return f"format migration of an older card (slice {ref} just ended)."
    if run.trigger == EvolutionRun.Trigger.SLICE_CLOSE:
        return f"slice {ref} just ended — review it and keep what matters."
    if run.trigger == EvolutionRun.Trigger.CATCH_UP:
        when = f"{run.slice.started_at:%Y-%m-%d}" if run.slice else "—"
        return (
            f"catching up on the person's history, one past slice at a time, oldest first: slice {ref} "
            f"(from {when}). Keep what still matters, citing this slice in refs; later slices may change it."
        )
    return f"a manual review (slice {ref})."
