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

from memory.card import Card, RefsResolver, apply_tool
from memory.card.format import is_ref
from memory.card.mutations import TOOLS as MUTATIONS
from memory.card.mutations import tool_arguments
from memory.curation import ExperienceRefused, propose_experience
from memory.models import CardSnapshot, Message, Profile, Slice
from memory.person_edits import rewrite_refusal

REF = {
    "type": "string",
    "pattern": r"^\d{4}/\d{2}/\d{2}/\d{4}$",
    "description": "a slice id YYYY/MM/DD/HHMM",
}
DAY = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
# The JSON schema of every argument name a tool may take.
ARGUMENTS: dict[str, dict] = {
    "field": {"type": "string", "description": "Identity field: Name, Address them as, Pronouns, Alias…"},
    "value": {"type": "string", "description": "the field's value; empty string clears the line"},
    "refs": {
        "type": "array",
        "items": REF,
        "minItems": 1,
        "description": "evidence: slice ids YYYY/MM/DD/HHMM (no brackets); required",
    },
    "text": {"type": "string"},
    "index": {"type": "integer", "minimum": 1, "description": "1-based, as numbered on the card"},
    "since": {**DAY, "description": "YYYY-MM-DD: since when this is true"},
    "by": {**DAY, "description": "YYYY-MM-DD: the due date"},
    "outcome": {"type": "string", "description": "how it was resolved"},
    "ref": REF,
    "summary": {"type": "string", "description": "one sentence: what changed and why"},
    "title": {"type": "string", "description": "a short title"},
    "content": {"type": "string", "description": "what happened, in one or two sentences"},
    "source_mids": {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "description": "ids of the archived messages it rests on, as shown in read_slice: (c_…) / (a_…)",
    },
    "event_time": {"type": "string", "description": "when it happened, YYYY-MM-DD or ISO time; empty if unknown"},
    "time_certainty": {"type": "string", "enum": ["exact", "approximate", "unknown"]},
}

DESCRIPTIONS = {
    "set_identity": "Set one Identity line (Name, Address them as, Pronouns, Alias…); max 8 lines.",
    "set_portrait": "Rewrite the Past portrait: one third-person paragraph, at most 2400 characters.",
    "add_anchor_fact": "Add an anchor fact to Past (dates, decisions, red lines still true in three years); max 8.",
    "remove_anchor_fact": "Remove anchor fact number `index` from Past.",
    "add_now": "Add a Now item: a short hook about the current state, with refs and since date; max 5.",
    "remove_now": "Drop Now item number `index`.",
    "promote_now": "Move Now item `index` to Past as an anchor fact worded by `text`.",
    "add_horizon": "Add a Horizon item: a commitment, deadline or awaited reply, with its by date.",
    "resolve_horizon": "Resolve Horizon item `index` (the only way one leaves), with its outcome.",
    "add_lesson": "Add a Self-model lesson on how to work with this person (a delta on the directives); max 10.",
    "remove_lesson": "Remove Self-model lesson number `index`.",
    "read_slice": "Read the full transcript of one of this person's slices.",
    "read_card_at": "Read the card as it was when a given slice ended.",
    "propose_experience": "Propose a candidate experience (an event in the person's life) citing the messages it "
    "rests on; the person or an admin confirms it later.",
    "finish": "End the run with a one-sentence summary of what changed (or why nothing did).",
}


@dataclass
class Context:
    """What a run's tools act on; the profile comes from the run, never from arguments."""

    profile: Profile
    card: Card
    refs_exist: RefsResolver
    accepted: list[tuple[str, dict]] = field(default_factory=list)
    summary: str | None = None  # set by finish


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

    def schema(self) -> dict:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {a: ARGUMENTS[a] for a in self.arguments},
                    "required": list(self.arguments),
                    "additionalProperties": False,
                },
            },
        }


REGISTRY: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    REGISTRY[tool.name] = tool
    return tool


def schemas() -> list[dict]:
    return [t.schema() for t in REGISTRY.values()]


def dispatch(ctx: Context, name: str, raw_arguments: str) -> Outcome:
    """Run one tool call; bad JSON or an unknown tool is an explanation, never an exception."""
    tool = REGISTRY.get(name)
    if tool is None:
        return Outcome(False, f"unknown tool {name!r} — use one of: {', '.join(REGISTRY)}")
    try:
        arguments = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as exc:
        return Outcome(False, f"arguments of {name} are not valid JSON ({exc.msg}) — retry")
    if not isinstance(arguments, dict):
        return Outcome(False, f"arguments of {name} must be a JSON object — retry")
    return tool.handler(ctx, arguments)


# --- card mutations, straight from memory.card ---------------------------------------------


def _mutation_handler(name: str) -> Callable[[Context, dict], Outcome]:
    def handle(ctx: Context, arguments: dict) -> Outcome:
        refusal = rewrite_refusal(ctx.profile, ctx.card, name, arguments)  # D7, K16: the person's say
        if refusal:
            return Outcome(False, f"refused: {refusal}", mutation=True)
        result = apply_tool(ctx.card, name, arguments, refs_exist=ctx.refs_exist)
        if result.accepted:
            ctx.card = result.card
            ctx.accepted.append((name, arguments))
            return Outcome(True, f"accepted: {result.message}", mutation=True)
        return Outcome(False, f"refused: {result.message}", mutation=True)

    return handle


for _name in MUTATIONS:
    register(Tool(_name, DESCRIPTIONS[_name], tool_arguments(_name), _mutation_handler(_name)))


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


def _read_slice(ctx: Context, arguments: dict) -> Outcome:
    ref = arguments.get("ref")
    slice_ = _slice_of(ctx, ref)
    if slice_ is None:
        return Outcome(False, f"refused: no slice {ref!r} for this person — refs look like 2026/08/11/1426")
    return Outcome(True, f"slice [{slice_.ref}]:\n{transcript(slice_)}")


def _read_card_at(ctx: Context, arguments: dict) -> Outcome:
    ref = arguments.get("ref")
    slice_ = _slice_of(ctx, ref)
    if slice_ is None:
        return Outcome(False, f"refused: no slice {ref!r} for this person — refs look like 2026/08/11/1426")
    snap = CardSnapshot.objects.filter(profile=ctx.profile, slice=slice_).first()
    if snap is None:
        return Outcome(True, f"no card was recorded at the end of [{slice_.ref}]")
    return Outcome(True, f"card at the end of [{slice_.ref}]:\n{snap.text or '(empty card)'}")


def _finish(ctx: Context, arguments: dict) -> Outcome:
    summary = arguments.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        return Outcome(False, "refused: finish needs a one-sentence summary")
    ctx.summary = " ".join(summary.split())[:300]
    return Outcome(True, "finished", finished=True)


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
            return Outcome(False, f"refused: event_time {raw_time!r} is not YYYY-MM-DD or an ISO time")
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
        return Outcome(False, f"refused: {exc}")
    return Outcome(True, f"accepted: candidate experience {experience.eid} recorded for review")


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
