"""The Previously Agent's tools: one registry entry per tool (name, schema, handler).

Card mutations come from `memory.card` (their argument names are the schema's
properties); the read tools, `propose_experience` (issue 5, through memory.curation) and
`finish` are the agent's own. Adding a tool is one `register(...)` call.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext_noop

from memory import consolidation
from memory.card import Card, RefsResolver, apply_tool
from memory.card.format import is_ref
from memory.card.mutations import TOOLS as MUTATIONS
from memory.card.mutations import tool_arguments
from memory.curation import ExperienceRefused, propose_experience
from memory.models import (
    CardSnapshot,
    EvolutionRun,
    ExperienceHistory,
    Message,
    Profile,
    Slice,
    SliceLogEntry,
)
from memory.phrases import json_error, say
from memory.rewrite_guard import rewrite_refusal

# Kept compact (issue 19): a small local model reads every schema on every agent call.
REF = {"type": "string", "pattern": r"^\d{4}/\d{2}/\d{2}/\d{4}$"}
DAY = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}


def _id_list(description: str, items: dict | None = None) -> dict:
    """A non-empty array of ids (slice refs or message ids): one shape for every id-list argument."""
    return {"type": "array", "items": items or {"type": "string"}, "minItems": 1, "description": description}


# The JSON schema of every argument name a tool may take.
ARGUMENTS: dict[str, dict] = {
    "field": {"type": "string", "description": "Name, Address them as, Pronouns, Alias…"},
    "value": {"type": "string", "description": "empty clears the line"},
    "refs": _id_list("evidence slice ids", REF),
    "text": {"type": "string"},
    "index": {"type": "integer", "minimum": 1, "description": "as numbered on the card"},
    "since": DAY,
    "by": DAY,
    "outcome": {"type": "string"},
    "ref": REF,
    "summary": {"type": "string"},
    "title": {"type": "string"},
    "content": {"type": "string", "description": "one or two sentences"},
    "source_mids": _id_list("message ids it rests on (c_…/a_…)"),
    "event_time": {"type": "string", "description": "YYYY-MM-DD or ISO time; empty if unknown"},
    "time_certainty": {"type": "string", "enum": ["exact", "approximate", "unknown"]},
    "eid": {"type": "string", "description": "experience id exp_…"},
    "keep_eid": {"type": "string"},
    "merge_eid": {"type": "string", "description": "the duplicate"},
    "evidence_mids": _id_list("ids of lines where the person says so"),
    "reason": {"type": "string"},
    "stopped_at": {"type": "string", "description": "YYYY-MM-DD or ISO time"},
}

DESCRIPTIONS = {
    "set_identity": "Set one Identity line; max 8.",
    "set_portrait": "Rewrite the Past portrait (third person, max 2400 chars); refs optional.",
    "add_anchor_fact": "Add a Past anchor fact still true in 3 years; max 8.",
    "remove_anchor_fact": "Remove Past anchor fact `index`.",
    "add_now": "Add a Now item with since date; max 5.",
    "remove_now": "Drop Now item `index`.",
    "promote_now": "Move Now item `index` to Past as anchor fact `text`.",
    "add_horizon": "Add a Horizon item (commitment, deadline) with by date.",
    "resolve_horizon": "Resolve Horizon item `index` with its outcome.",
    "add_lesson": "Add a Self-model lesson (a delta on the directives); max 10.",
    "remove_lesson": "Remove Self-model lesson `index`.",
    "read_slice": "Read one slice's transcript.",
    "read_card_at": "Read the card as it was when a slice ended.",
    "read_slice_log": "Read one slice's cognitive log (analyzer verdicts, runs, tool calls).",
    "propose_experience": "Add a candidate experience citing its messages.",
    "update_experience": "Reword an experience still true but changed in detail.",
    "merge_experiences": "Fold a duplicate experience into another.",
    "invalidate_experience": "Mark an experience no longer true, from stopped_at.",
    "confirm_with_evidence": "Make a candidate experience active; the person said so.",
    "finish": "End the run with one sentence: what changed and why (or why nothing).",
}


@dataclass
class Context:
    """What a run's tools act on; the profile comes from the run, never from arguments."""

    profile: Profile
    card: Card
    refs_exist: RefsResolver
    accepted: list[tuple[str, dict]] = field(default_factory=list)
    summary: str | None = None  # set by finish
    run: EvolutionRun | None = None  # the run its history rows name
    offered: tuple[str, ...] = ()  # the tools of this phase; empty: all
    experience_changes: list[str] = field(default_factory=list)  # "+ exp_…: title" lines for the diff


@dataclass(frozen=True)
class Outcome:
    accepted: bool
    message: str
    mutation: bool = False  # True: the call changed (or tried to change) the card
    finished: bool = False


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: tuple[str, ...]
    handler: Callable[[Context, dict[str, Any]], Outcome]
    optional: tuple[str, ...] = ()  # arguments the model may leave out

    def schema(self) -> dict:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {a: ARGUMENTS[a] for a in (*self.arguments, *self.optional)},
                    "required": list(self.arguments),
                    "additionalProperties": False,
                },
            },
        }


REGISTRY: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    REGISTRY[tool.name] = tool
    return tool


CARD_PHASE = (*MUTATIONS, "read_slice", "read_card_at", "read_slice_log", "propose_experience", "finish")
EXPERIENCE_PHASE = (
    "read_slice",
    "read_slice_log",
    "propose_experience",
    "update_experience",
    "merge_experiences",
    "invalidate_experience",
    "confirm_with_evidence",
    "finish",
)


def schemas(names: tuple[str, ...] = ()) -> list[dict]:
    """The schemas of the tools `names` (all when empty), compact: one line per tool."""
    return [REGISTRY[n].schema() for n in names] if names else [t.schema() for t in REGISTRY.values()]


def dispatch(ctx: Context, name: str, raw_arguments: str) -> Outcome:
    """Run one tool call; bad JSON or an unknown tool is an explanation, never an exception."""
    tool = REGISTRY.get(name)
    if tool is None:
        return Outcome(False, say(gettext_noop("unknown tool %(tool)s — use one of: %(tools)s"),
                                  tool=repr(name), tools=", ".join(ctx.offered or REGISTRY)))
    if ctx.offered and name not in ctx.offered:
        return Outcome(False, say(gettext_noop("refused: %(tool)s is not offered in this step — use one of: %(tools)s"),
                                  tool=name, tools=", ".join(ctx.offered)))
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as exc:
        return Outcome(False, say(gettext_noop("arguments of %(tool)s are not valid JSON (%(error)s) — retry"),
                                  tool=name, error=json_error(exc.msg)))
    if not isinstance(arguments, dict):
        return Outcome(False, say(gettext_noop("arguments of %(tool)s must be a JSON object — retry"), tool=name))
    return tool.handler(ctx, arguments)


# --- card mutations, straight from memory.card ---------------------------------------------


# Mutations whose card text carries no refs but which may cite newer slices as evidence for
# changing what the person wrote by hand (K16); the refs only reach rewrite_refusal. The
# portrait's schema names them (EVIDENCE_REFS_IN_SCHEMA); the index-based removals' schemas do
# not (the small models' schema budget, issue 19: +600 characters), so a removal learns of
# them from its refusal ("cite that newer slice in refs") and may then call again with them,
# instead of being told the argument is unexpected.
EVIDENCE_ONLY_REFS = ("set_portrait", "remove_anchor_fact", "remove_now", "resolve_horizon", "remove_lesson")
EVIDENCE_REFS_IN_SCHEMA = ("set_portrait",)


def _mutation_handler(name: str) -> Callable[[Context, dict], Outcome]:
    def handle(ctx: Context, arguments: dict) -> Outcome:
        refusal = rewrite_refusal(ctx.profile, ctx.card, name, arguments)  # D7, K16: the person's say
        if refusal:
            return Outcome(False, refused(refusal), mutation=True)
        if name in EVIDENCE_ONLY_REFS:
            arguments = {k: v for k, v in arguments.items() if k != "refs"}
        result = apply_tool(ctx.card, name, arguments, refs_exist=ctx.refs_exist)
        if result.accepted:
            ctx.card = result.card
            ctx.accepted.append((name, arguments))
            return Outcome(True, say(gettext_noop("accepted: %(result)s"), result=result.message), mutation=True)
        return Outcome(False, refused(result.message), mutation=True)

    return handle


for _name in MUTATIONS:
    register(Tool(_name, DESCRIPTIONS[_name], tool_arguments(_name), _mutation_handler(_name),
                  optional=("refs",) if _name in EVIDENCE_REFS_IN_SCHEMA else ()))


# --- reading --------------------------------------------------------------------------------

TRANSCRIPT_MAX_CHARS = 12000


def _slice_of(ctx: Context, ref: object) -> Slice | None:
    if not isinstance(ref, str) or not is_ref(ref):
        return None
    return Slice.objects.for_profile(ctx.profile).by_ref(ref).first()


def transcript(slice_: Slice, *, limit: int = TRANSCRIPT_MAX_CHARS) -> str:
    """The slice's turns as plain lines, oldest first, cut at `limit` characters."""
    lines = []
    for m in Message.objects.in_slice(slice_).live().chronological():
        when = m.created_at.strftime("%H:%M")
        lines.append(f"[{when}] ({m.mid}) {m.speaker}: {m.content}")
    text = "\n".join(lines) or "(no messages)"
    if len(text) > limit:
        text = text[:limit] + f"\n… cut at {limit} characters"
    return text


def refused(reason: str) -> str:
    """A refusal's tool answer: "refused: " and the reason (either may be shown translated)."""
    return say(gettext_noop("refused: %(reason)s"), reason=reason)


def _no_slice(ref: object) -> Outcome:
    return Outcome(False, refused(say(gettext_noop("no slice %(ref)s for this person — refs look like 2026/08/11/1426"),
                                      ref=repr(ref))))


def _read_slice(ctx: Context, arguments: dict) -> Outcome:
    ref = arguments.get("ref")
    slice_ = _slice_of(ctx, ref)
    if slice_ is None:
        return _no_slice(ref)
    return Outcome(True, f"slice [{slice_.ref}]:\n{transcript(slice_)}")


def _read_card_at(ctx: Context, arguments: dict) -> Outcome:
    ref = arguments.get("ref")
    slice_ = _slice_of(ctx, ref)
    if slice_ is None:
        return _no_slice(ref)
    snap = CardSnapshot.objects.filter(profile=ctx.profile, slice=slice_).first()
    if snap is None:
        return Outcome(True, say(gettext_noop("no card was recorded at the end of [%(ref)s]"), ref=slice_.ref))
    return Outcome(True, f"card at the end of [{slice_.ref}]:\n{snap.text or '(empty card)'}")


def _finish(ctx: Context, arguments: dict) -> Outcome:
    summary = arguments.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        return Outcome(False, refused(say(gettext_noop("finish needs a one-sentence summary"))))
    ctx.summary = " ".join(summary.split())[:300]
    return Outcome(True, say(gettext_noop("finished")), finished=True)


register(Tool("read_slice", DESCRIPTIONS["read_slice"], ("ref",), _read_slice))
register(Tool("read_card_at", DESCRIPTIONS["read_card_at"], ("ref",), _read_card_at))
register(Tool("finish", DESCRIPTIONS["finish"], ("summary",), _finish))


def _propose_experience(ctx: Context, arguments: dict) -> Outcome:
    """Issue 5 (C3): a candidate, never a fact; every source mid must be live in this profile."""
    event_time = None
    raw_time = arguments.get("event_time") or ""
    if raw_time:
        event_time = parse_datetime(raw_time) or _day(raw_time)
        if event_time is None:
            return Outcome(False, refused(say(gettext_noop("event_time %(value)s is not YYYY-MM-DD or an ISO time"),
                                              value=repr(raw_time))))
        if timezone.is_naive(event_time):
            event_time = timezone.make_aware(event_time, UTC)
    try:
        experience = propose_experience(
            profile=ctx.profile,
            title=str(arguments.get("title") or ""),
            content=str(arguments.get("content") or ""),
            source_mids=[str(m) for m in arguments.get("source_mids") or []],
            event_time=event_time,
            time_certainty=str(arguments.get("time_certainty") or "unknown"),
            actor="agent",
            reason="proposed by the Previously Agent",
        )
    except ExperienceRefused as exc:
        return Outcome(False, refused(exc.reason))
    if ctx.run is not None:
        experience.history.filter(action="create").update(run=ctx.run)
    ctx.experience_changes.append(f"+ {experience.eid} (candidate): {experience.title} — {experience.content}")
    return Outcome(True, say(gettext_noop("accepted: candidate experience %(eid)s recorded for review"), eid=experience.eid))


def _day(text: str) -> datetime | None:
    day = parse_date(text)
    return datetime(day.year, day.month, day.day) if day else None


register(
    Tool(
        "propose_experience",
        DESCRIPTIONS["propose_experience"],
        ("title", "content", "source_mids", "event_time", "time_certainty"),
        _propose_experience,
    )
)


# --- reading a slice's cognitive log (S2) ------------------------------------------------------

LOG_MAX_ENTRIES = 60


def _read_slice_log(ctx: Context, arguments: dict) -> Outcome:
    ref = arguments.get("ref")
    slice_ = _slice_of(ctx, ref)
    if slice_ is None:
        return _no_slice(ref)
    entries = list(SliceLogEntry.objects.filter(slice=slice_).order_by("-created_at", "-id")[:LOG_MAX_ENTRIES])
    if not entries:
        return Outcome(True, say(gettext_noop("the log of [%(ref)s] is empty"), ref=slice_.ref))
    lines = [f"[{e.created_at:%Y-%m-%d %H:%M}] {e.kind}: {e.summary}" for e in reversed(entries)]
    return Outcome(True, f"log of [{slice_.ref}] (newest {len(entries)}):\n" + "\n".join(lines))


register(Tool("read_slice_log", DESCRIPTIONS["read_slice_log"], ("ref",), _read_slice_log))


# --- keeping experiences current (C4, C5; memory.consolidation validates) ---------------------


def _consolidate(
    change: Callable[..., object], line: Callable[[object, dict], str], names: tuple[str, ...]
) -> Callable[[Context, dict], Outcome]:
    def handle(ctx: Context, arguments: dict) -> Outcome:
        unexpected = sorted(set(arguments) - set(names))
        if unexpected:
            return Outcome(False, refused(say(gettext_noop("unexpected argument(s) %(unexpected)s — it takes %(names)s"),
                                              unexpected=", ".join(unexpected), names=", ".join(names))))
        try:
            experience = change(profile=ctx.profile, run=ctx.run, **{n: arguments.get(n) for n in names})
        except ExperienceRefused as exc:
            return Outcome(False, refused(exc.reason))
        text = line(experience, arguments)
        ctx.experience_changes.append(text)
        return Outcome(True, f"accepted: {text}")

    return handle


UPDATE = ("eid", "title", "content", "evidence_mids", "reason")
MERGE = ("keep_eid", "merge_eid", "title", "content", "evidence_mids", "reason")
INVALIDATE = ("eid", "stopped_at", "evidence_mids", "reason")
CONFIRM = ("eid", "evidence_mids", "reason")


def _was(experience) -> str:
    row = experience.history.filter(actor=ExperienceHistory.Actor.AGENT).order_by("-id").first()
    before = (row.before or {}) if row else {}
    return f"{before.get('title', '')} — {before.get('content', '')}"


register(
    Tool(
        "update_experience",
        DESCRIPTIONS["update_experience"],
        UPDATE,
        _consolidate(
            consolidation.update_experience,
            lambda e, a: f"~ {e.eid}: {_was(e)} → {e.title} — {e.content}",
            UPDATE,
        ),
    )
)
register(
    Tool(
        "merge_experiences",
        DESCRIPTIONS["merge_experiences"],
        MERGE,
        _consolidate(
            consolidation.merge_experiences,
            lambda e, a: f"⇐ {a.get('merge_eid')} merged into {e.eid}: {e.title} — {e.content}",
            MERGE,
        ),
    )
)
register(
    Tool(
        "invalidate_experience",
        DESCRIPTIONS["invalidate_experience"],
        INVALIDATE,
        _consolidate(
            consolidation.invalidate_experience,
            lambda e, a: f"- {e.eid} no longer true since {e.invalid_at:%Y-%m-%d}: {e.title} — {e.content}",
            INVALIDATE,
        ),
    )
)
register(
    Tool(
        "confirm_with_evidence",
        DESCRIPTIONS["confirm_with_evidence"],
        CONFIRM,
        _consolidate(consolidation.confirm_with_evidence, lambda e, a: f"✓ {e.eid} confirmed: {e.title}", CONFIRM),
    )
)
