"""The turn analyzer (K10): spots explicit memory requests and corrections after each reply,
and decides at slice close whether the slice is worth an evolution run.

Rules first (regexes, Chinese and English — instant and always available); the model is
asked too when one is configured, off the reply path. At slice close the model decides
"worth it?"; if it fails, the run happens anyway (missing an evolution loses memory for
good; a wasted worker call is cheap).
"""

import json
import logging
import re
from dataclasses import dataclass

from django.conf import settings

from memory.card import detect_format
from memory.card.store import live_card
from memory.models import EvolutionRun, Message, Profile, Slice, SliceLogEntry
from memory.slices import log as slice_log
from previously.agent.tools import transcript
from previously.llm import Provider, ProviderError, get_provider
from previously.llm.select import output_cap

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    """After a reply: was it an explicit memory request (K10 trigger 2)?"""

    explicit: bool
    kind: str = ""  # "memory_request" | "correction"
    reason: str = ""
    source: str = "rules"  # "rules" | "model"
    run: EvolutionRun | None = None  # the explicit run it started, if any


@dataclass(frozen=True)
class Worth:
    """At slice close: is the slice worth an evolution run (K10 trigger 1)?"""

    worth: bool
    reason: str
    failed: bool = False  # the analyzer itself failed: run anyway


# --- deterministic rules ----------------------------------------------------------------------

_REQUEST_PATTERNS = [
    r"\bremember\b(?! when\b)",
    r"\bdon'?t forget\b",
    r"\bkeep in mind\b",
    r"\bmake a note\b",
    r"\bnote (?:that|this)\b",
    r"\bupdate (?:your|the|my) (?:card|memory|notes)\b",
    r"\bforget (?:that|this|about)\b",
    r"记住",
    r"记一下",
    r"记下来?",
    r"别忘了",
    r"不要忘",
    r"更新(?:一下)?你?的?(?:卡片|记忆)",
    r"忘掉",
    r"忘了(?:这|那)",
]
_CORRECTION_PATTERNS = [
    r"\bstop (?!by\b)\w+ing\b",
    r"\bdon'?t (?:ever |keep |always )?(?:call|say|ask|mention|use|do)\b",
    r"\bnever (?:call|say|ask|mention|use|do)\b",
    r"\bfrom now on\b",
    r"\bin (?:the )?future,? (?:please )?(?:always|never|don'?t)\b",
    r"\bplease always\b",
    r"\b(?:that'?s|that is) (?:wrong|not right|not true)\b",
    r"\bactually,? (?:my|i'?m|i am|it'?s)\b",
    r"\bmy name is\b",
    r"\bcall me\b",
    r"别再",
    r"不要再",
    r"以后(?:请)?(?:总是|都|要|别|不要)",
    r"从现在(?:开始|起)",
    r"你(?:说|记)错了",
    r"(?:^|[，,。！!？?\s])不对[，,。！!\s]",
    r"(?:^|[，,。！!？?\s])(?:请|以后|你可以)?叫我",
    r"我的名字(?:是|叫)",
]
_REQUEST_RE = re.compile("|".join(_REQUEST_PATTERNS), re.IGNORECASE)
_CORRECTION_RE = re.compile("|".join(_CORRECTION_PATTERNS), re.IGNORECASE)


def detect_request(user_text: str) -> Verdict:
    """The deterministic check: an explicit memory request or a behaviour correction."""
    text = user_text or ""
    if m := _REQUEST_RE.search(text):
        return Verdict(True, "memory_request", f"asked to remember: {m.group(0)!r}")
    if m := _CORRECTION_RE.search(text):
        return Verdict(True, "correction", f"a correction: {m.group(0)!r}")
    return Verdict(False, reason="no explicit request")


# --- after each reply (`lifecycle.after_reply` acts on the verdict) -------------------------


def wants_model_look() -> bool:
    """Whether the model also looks at a turn the rules found nothing in (off the reply path)."""
    return bool(settings.PREVIOUSLY_TURN_ANALYZER_MODEL) and not get_provider().offline


def log_request(slice_: Slice, verdict: Verdict) -> None:
    """An explicit request or correction goes on the slice's log before its run starts."""
    slice_log(
        slice_,
        SliceLogEntry.Kind.ANALYZER,
        f"{verdict.kind}: {verdict.reason} ({verdict.source})",
        event="memory_update",
        request_kind=verdict.kind,
        source=verdict.source,
    )


TURN_PROMPT = """You are the turn analyzer of a companion chat with a long-term memory. Decide \
whether the user's last message is an explicit request to remember, forget or update something \
("remember…", "update your card", 记住…, 更新你的卡片) or a correction of the companion's behaviour \
or facts ("stop doing X", "from now on always…", 别再…, 以后总是…). Answer with JSON only: \
{"memory_update": true|false, "kind": "memory_request"|"correction"|"", "reason": "<short>"}"""


def model_verdict(slice_: Slice, user_text: str, reply_text: str) -> Verdict:
    """The model's look at one turn; a failure or a "no" is logged and is not explicit."""
    provider = get_provider()
    try:
        answer = _ask_json(
            provider,
            TURN_PROMPT,
            f"User:\n<<<\n{user_text}\n>>>\n\nCompanion's reply:\n<<<\n{reply_text}\n>>>",
        )
        explicit = bool(answer.get("memory_update"))
        verdict = Verdict(
            explicit,
            str(answer.get("kind") or ("memory_request" if explicit else "")),
            str(answer.get("reason") or "")[:200],
            "model",
        )
    except (ProviderError, ValueError) as exc:
        slice_log(slice_, SliceLogEntry.Kind.ANALYZER, f"turn analyzer model failed ({exc}); rules: no request",
                  event="analyzer_failed", error=str(exc))
        return Verdict(False, reason="model failed", source="model")
    if not verdict.explicit:
        slice_log(slice_, SliceLogEntry.Kind.ANALYZER, f"no explicit request (model): {verdict.reason}",
                  event="turn", source="model", reason=verdict.reason)
    return verdict


# --- at slice close ---------------------------------------------------------------------------

WORTH_PROMPT = """You are the turn analyzer of a companion chat with a long-term memory. A \
conversation slice just ended. Decide whether it holds anything worth keeping on the user's \
card: facts about the person, changes in their life, plans or commitments, corrections, \
lessons on how to talk with them. Small talk with nothing new is not worth it. Answer with \
JSON only: {"worth": true|false, "reason": "<one short sentence>"}"""


def worth_evolving(slice_: Slice, *, provider: Provider | None = None) -> Worth:
    """The "worth it?" gate at slice close; a failure is a Worth(failed=True) — run anyway."""
    provider = provider or get_provider()
    if not Message.objects.in_slice(slice_).live().filter(speaker=Message.Speaker.USER).exists():
        verdict = Worth(False, "the slice has no user messages")
    else:
        card = live_card(slice_.profile).text or "(empty card)"
        try:
            answer = _ask_json(
                provider,
                WORTH_PROMPT,
                f"The card now:\n<<<\n{card}\n>>>\n\nThe slice {slice_.ref}:\n<<<\n{transcript(slice_)}\n>>>",
            )
            if "worth" not in answer:
                raise ValueError("the answer has no 'worth' field")
            verdict = Worth(bool(answer["worth"]), str(answer.get("reason") or "")[:200])
        except (ProviderError, ValueError) as exc:
            verdict = Worth(True, f"analyzer failed ({exc})", failed=True)
    summary = (
        "analyzer failed — ran anyway"
        if verdict.failed
        else f"{'worth evolving' if verdict.worth else 'not worth evolving'}: {verdict.reason}"
    )
    slice_log(slice_, SliceLogEntry.Kind.ANALYZER, summary, event="worth", worth=verdict.worth,
              failed=verdict.failed, reason=verdict.reason)
    return verdict


def card_needs_migration(profile: Profile) -> bool:
    """A card in an older format forces a run at the next slice close (K10)."""
    return detect_format(live_card(profile).text) == "legacy"


_JSON_RE = re.compile(r"\{.*\}", re.DOTALL)


def _ask_json(provider: Provider, system: str, user: str) -> dict:
    completion = provider.complete(
        [{"role": "system", "content": system}, {"role": "user", "content": user}],
        max_tokens=output_cap("analyzer"),
    )
    match = _JSON_RE.search(completion.content or "")
    if not match:
        raise ValueError("the analyzer did not answer JSON")
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the analyzer's JSON is invalid: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise ValueError("the analyzer's JSON is not an object")
    return value
