"""Issue 19, point 4: 30 slices in which facts change, evolved by a scripted agent.

A person moves city, changes job, switches running day, comes back from a trip and swaps the
language they learn. After each slice closes, a real evolution run goes through the whole
pipeline — card phase, then the review of the experiences that recall picks — against a
scripted model. The model's decisions are scripted per slice (which topic is new, repeated,
changed or over), but it sees only what the run shows it: it can touch an experience only when
its id is in the review briefing (recall picked it), and every call goes through the tools'
validation (evidence that exists and says so, the hand-edit guard). So the count of superseded
facts left active measures the pipeline, not the script.

`baseline=True` is the agent before issue 19: `propose_experience` only, no review.

    python -m bench.consolidation            # scratch SQLite; prints the table and both prompts
"""

import json
import os
import re
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import django

if __name__ == "__main__":  # a scratch SQLite database, set up before the models are imported
    os.environ["DATABASE_URL"] = f"sqlite:///{Path(tempfile.mkdtemp(prefix='previously-consolidation-')) / 'db.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from memory.archive import archive_message  # noqa: E402
from memory.clock import local_clock  # noqa: E402
from memory.models import Experience, Profile  # noqa: E402
from memory.recall import recall  # noqa: E402
from previously.agent.evolve import create_run, execute_run  # noqa: E402
from previously.chat import prompt  # noqa: E402
from previously.llm.base import Completion, ToolCall  # noqa: E402

START = datetime(2026, 8, 1, 9, 0, tzinfo=UTC)
# (what the person says, [(action, topic, value)]): new, repeat, change (value replaces the
# topic's old one), end (the topic's value is over).
SCRIPT: list[tuple[str, list[tuple[str, str, str]]]] = [
    ("I live in Berlin, near the Spree.", [("new", "Home", "Berlin")]),
    ("I work at the bakery on Oranienstraße, early shifts.", [("new", "Job", "bakery")]),
    ("I run on Wednesdays before work, 5 km.", [("new", "Run", "Wednesday")]),
    ("I'm planning a trip to Japan in October ✈️", [("new", "Trip", "Japan")]),
    ("I'm learning Spanish on my phone every evening.", [("new", "Learning", "Spanish")]),
    ("Pizza night with friends, nothing special.", []),
    ("Still in Berlin — the Spree was lovely today.", [("repeat", "Home", "Berlin")]),
    ("Long shift at the bakery again.", [("repeat", "Job", "bakery")]),
    ("Ran this Wednesday, felt strong.", [("repeat", "Run", "Wednesday")]),
    ("Booked the flights for the Japan trip!", [("repeat", "Trip", "Japan")]),
    ("Spanish lesson 20 done, 我很开心.", [("repeat", "Learning", "Spanish")]),
    ("Watched a film, fell asleep halfway.", []),
    ("We moved to Lisbon! No longer living in Berlin.", [("change", "Home", "Lisbon")]),
    ("Boxes everywhere, so tired.", []),
    ("Started a new job at the library; I quit the bakery.", [("change", "Job", "library")]),
    ("Lisbon is sunny, I love living here.", [("repeat", "Home", "Lisbon")]),
    ("I run on Saturdays now; Wednesdays don't work any more.", [("change", "Run", "Saturday")]),
    ("Rainy day, stayed in.", []),
    ("Back from the Japan trip, it was amazing 🗾", [("end", "Trip", "Japan")]),
    ("The library job is quiet and nice.", [("repeat", "Job", "library")]),
    ("Ran on Saturday by the river in Lisbon.", [("repeat", "Run", "Saturday")]),
    ("I stopped learning Spanish; learning Portuguese now, for Lisbon.", [("change", "Learning", "Portuguese")]),
    ("Made soup.", []),
    ("Portuguese class twice a week, learning fast.", [("repeat", "Learning", "Portuguese")]),
    ("My cat Miso turned three 🐱", [("new", "Pet", "Miso")]),
    ("Miso the cat sleeps on my keyboard.", [("repeat", "Pet", "Miso")]),
    ("Quiet week.", []),
    ("Lisbon friends came over for dinner.", [("repeat", "Home", "Lisbon")]),
    ("Planning a trip to Iceland next spring.", [("new", "Trip", "Iceland")]),
    ("Shelved books at the library all day, happy.", [("repeat", "Job", "library")]),
]
TRUE_AT_END = {("Home", "Lisbon"), ("Job", "library"), ("Run", "Saturday"), ("Learning", "Portuguese"),
               ("Pet", "Miso"), ("Trip", "Iceland")}
QUESTION = "Where do I live, where do I work, when do I run, what am I learning?"

_EXPERIENCE_LINE = re.compile(r"^- (\S+) \[(\w+)[^\]]*\] (\w+): (\w+): ", re.M)
_USER_LINE = re.compile(r"^\[\d\d:\d\d\] \((c_[0-9a-f]{16})\) user: ", re.M)


def _title(topic: str, value: str) -> str:
    return f"{topic}: {value}"


class ScriptedAgent:
    """A provider whose decisions come from SCRIPT; it acts only on ids the briefing shows it."""

    name = "scripted consolidation agent"
    model = "scripted"
    offline = False
    supports_images = False

    def __init__(self, *, baseline: bool):
        self.baseline = baseline
        self.step: list[tuple[str, str, str]] = []
        self.day = ""
        self.calls = 0

    def complete(self, messages, *, tools=None, model=None, max_tokens=None) -> Completion:
        self.calls += 1
        if any(m["role"] == "tool" for m in messages):
            return self._call("finish", {"summary": "Kept memory current."})
        briefing = messages[1]["content"]
        mids = _USER_LINE.findall(briefing)
        offered = {t["function"]["name"] for t in tools or []}
        if "set_identity" in offered:  # the card phase: new facts become candidates
            calls = [
                ("propose_experience", {
                    "title": _title(topic, value), "content": self.text, "source_mids": mids,
                    "event_time": self.day, "time_certainty": "exact",
                })
                for action, topic, value in self.step if action in ("new", "change")
            ]
            return self._calls([*calls, ("finish", {"summary": "Card unchanged; new facts proposed."})])
        listed = [
            {"eid": eid, "status": status, "topic": topic, "value": value}
            for eid, status, topic, value in _EXPERIENCE_LINE.findall(briefing)
        ]
        calls = []
        for action, topic, value in self.step:
            for e in listed:
                if e["topic"] != topic:
                    continue
                same = e["value"] == value
                if action in ("change", "end") and (not same or action == "end"):
                    calls.append(("invalidate_experience", {
                        "eid": e["eid"], "stopped_at": self.day, "evidence_mids": mids,
                        "reason": f"{topic} is now {value}" if action == "change" else f"{topic} {value} is over",
                    }))
                elif action == "repeat" and same and e["status"] == "candidate":
                    calls.append(("confirm_with_evidence", {"eid": e["eid"], "evidence_mids": mids, "reason": "said again"}))
        return self._calls([*calls, ("finish", {"summary": "Reviewed."})])

    def _calls(self, calls) -> Completion:
        return Completion(
            content="",
            tool_calls=[ToolCall(id=uuid.uuid4().hex[:8], name=n, arguments=json.dumps(a, ensure_ascii=False)) for n, a in calls],
            finish_reason="tool_calls",
        )

    def _call(self, name, arguments) -> Completion:
        return self._calls([(name, arguments)])

    async def astream(self, messages, *, timeout=None, max_tokens=None):  # the chat is not part of this scenario
        raise NotImplementedError
        yield ""


def run(*, profile: Profile, baseline: bool = False) -> dict:
    """Play SCRIPT into `profile` (empty), one closed slice and one evolution run per line."""
    agent = ScriptedAgent(baseline=baseline)
    statuses = []
    for i, (text, step) in enumerate(SCRIPT):
        at = START + timedelta(days=2 * i)
        agent.step, agent.text, agent.day = step, text, at.date().isoformat()
        archived = archive_message(
            profile=profile, mid=f"c_{i + 1:016x}", speaker="user", content=text, created_at=at, tz="UTC",
            new_conversation=True,
        )
        slice_ = archived.message.slice
        slice_.close(reason="gap", at=at + timedelta(minutes=1))
        run_ = create_run(profile=profile, slice_=slice_, trigger="manual")
        if baseline:
            slice_.ended_at = None  # the old agent had no review: keep the slice "open" to skip it
            slice_.save(update_fields=["ended_at"])
        statuses.append(execute_run(run_.pk, provider=agent).status)
        if baseline:
            slice_.close(reason="gap", at=at + timedelta(minutes=1))
    refused = sum(
        1 for r in profile.evolution_runs.all() for step in r.steps if step.get("event") == "tool" and not step.get("accepted")
    )
    return measure(profile) | {"model_calls": agent.calls, "runs": _count(statuses), "refused_tool_calls": refused}


def _count(items):
    out: dict[str, int] = {}
    for x in items:
        out[str(x)] = out.get(str(x), 0) + 1
    return out


def measure(profile: Profile) -> dict:
    """Superseded facts still valid, end truths active, and each active one's chain to evidence."""
    valid = list(Experience.objects.for_profile(profile).valid().prefetch_related("history", "source_links"))
    said = {(e.title.split(": ", 1)[0], e.title.split(": ", 1)[1]): e for e in valid if ": " in e.title}
    superseded_left = sorted(f"{t}: {v}" for (t, v) in said if (t, v) not in TRUE_AT_END)
    active = [e for e in valid if e.status == Experience.Status.ACTIVE]
    chained = [
        e for e in active
        if e.source_links.exists() and all((h.after or {}).get("evidence_mids") or h.action == "create" for h in e.history.all())
    ]
    invalidated = Experience.objects.for_profile(profile).filter(invalid_at__isnull=False)
    return {
        "superseded_facts": len({(t, v) for _, s in SCRIPT for a, t, v in s if a in ("new", "change")} - TRUE_AT_END),
        "superseded_left_valid": superseded_left,
        "true_at_end_active": sorted(e.title for e in active if tuple(e.title.split(": ", 1)) in TRUE_AT_END),
        "true_at_end_candidate": sorted(e.title for e in valid if e.status == "candidate" and tuple(e.title.split(": ", 1)) in TRUE_AT_END),
        "active": len(active),
        "active_with_evidence_chain": len(chained),
        "invalidated": sorted(f"{e.title} (until {e.invalid_at:%Y-%m-%d})" for e in invalidated),
    }


def prompt_sections(profile: Profile) -> str:
    """The experience sections of the system prompt for QUESTION at the scenario's end."""
    now = START + timedelta(days=2 * len(SCRIPT) + 1)
    recalled = recall(profile=profile, query=QUESTION, now=now)
    slice_ = profile.slices.order_by("-started_at").first()
    text = prompt.system_prompt(
        profile=profile, slice_=slice_, card_text="", clock=local_clock(now, "UTC"), recalled=recalled,
    )
    words = prompt.words_for(profile)
    start = text.index(words.active)
    return text[start:text.index(words.awareness)].strip()


def main() -> None:
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create(username=f"bench-{uuid.uuid4().hex[:6]}")
    results = {}
    for label, baseline in (("before issue 19 (propose only)", True), ("with consolidation", False)):
        profile = Profile.objects.create(user=user, key=f"p{len(results)}", language="en")
        results[label] = run(profile=profile, baseline=baseline) | {"prompt": prompt_sections(profile)}
    for label, r in results.items():
        print(f"\n## {label}\n")
        print(f"superseded facts: {r['superseded_facts']}, left valid: {len(r['superseded_left_valid'])} "
              f"{r['superseded_left_valid']}")
        print(f"true at the end, active: {r['true_at_end_active']}; candidate: {r['true_at_end_candidate']}")
        print(f"active: {r['active']} (with an evidence chain: {r['active_with_evidence_chain']}); "
              f"model calls: {r['model_calls']}; runs: {r['runs']}; refused tool calls: {r['refused_tool_calls']}")
        print(f"invalidated: {r['invalidated']}")
        print("\nprompt (experience sections) for: " + QUESTION + "\n\n" + r["prompt"])


if __name__ == "__main__":
    main()
