"""What the person did to the card by hand or by deleting (SPEC D7, K16), as the agent must
respect it.

Removals and hand edits are recorded as evolution runs (trigger `forget` or `hand_edit`)
whose first step lists `removed` and `added` lines ({"section", "words", "text"}). From
them: `person_changes()` for the agent's briefing, and `rewrite_refusal()`, the check every
agent mutation passes: a line the person removed is not written back, and a line the person
wrote is not removed or rewritten, unless the call cites a conversation newer than the
person's change (newer evidence).
"""

import re
from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext_noop

from memory.card import Card
from memory.card.lines import card_lines
from memory.models import EvolutionRun, Profile, Slice
from memory.phrases import say

PERSON_TRIGGERS = (EvolutionRun.Trigger.FORGET, EvolutionRun.Trigger.HAND)
# Which card list each agent tool reads its index from, and which argument holds new words.
_INDEX_OF = {
    "remove_anchor_fact": "facts", "remove_now": "now", "promote_now": "now",
    "resolve_horizon": "horizon", "remove_lesson": "lessons",
}
_WORDS_OF = {
    "add_anchor_fact": "text", "add_now": "text", "add_horizon": "text", "add_lesson": "text",
    "promote_now": "text", "set_portrait": "text",
}
_TOKEN = re.compile(r"[\w']+|[^\W\d_]", re.UNICODE)


@dataclass(frozen=True)
class Change:
    kind: str  # "removed" or "added"
    section: str
    words: str
    at: datetime
    trigger: str
    part: str = ""  # "portrait" for the Past portrait the person wrote; "" for a card line


def person_changes(profile: Profile, *, limit: int = 40) -> list[Change]:
    """The person's removals and hand-written lines, newest first."""
    out: list[Change] = []
    runs = EvolutionRun.objects.filter(profile=profile, trigger__in=PERSON_TRIGGERS).order_by("-created_at")[:200]
    for run in runs:
        for step in run.steps or []:
            if not isinstance(step, dict):
                continue
            for kind in ("removed", "added"):
                for item in step.get(kind) or []:
                    if isinstance(item, dict) and item.get("words"):
                        out.append(Change(kind, str(item.get("section", "")), str(item["words"]),
                                          run.finished_at or run.created_at, run.trigger,
                                          str(item.get("part", ""))))
    return out[:limit]


def _tokens(text: str) -> set[str]:
    return {t.casefold() for t in _TOKEN.findall(text) if t != "deleted"}


def _similar(a: str, b: str) -> bool:
    a_, b_ = a.strip().casefold(), b.strip().casefold()
    if not a_ or not b_:
        return False
    if a_ in b_ or b_ in a_:
        return True
    ta, tb = _tokens(a), _tokens(b)
    return bool(ta and tb) and len(ta & tb) / min(len(ta), len(tb)) >= 0.7


def _keeps(text: str, theirs: str) -> bool:
    """Whether `text` still says what the person wrote in `theirs`: it contains it, or holds
    most of its words (unlike `_similar`, a shorter text that drops most of theirs does not)."""
    t, w = text.strip().casefold(), theirs.strip().casefold()
    if not t or not w:
        return False
    if w in t:
        return True
    mine, kept = _tokens(theirs), _tokens(text)
    return bool(mine) and len(mine & kept) / len(mine) >= 0.7


def _portrait_refusal(card: Card, words: object, newest: datetime | None, changes: list[Change]) -> str | None:
    """set_portrait over the portrait the person wrote: refused unless the new one keeps
    their text or the call cites a conversation newer than their edit."""
    current = card.portrait or ""
    new = words if isinstance(words, str) else ""
    for change in changes:
        if change.kind != "added" or change.part != "portrait":
            continue
        if not _keeps(current, change.words) or _keeps(new, change.words):
            continue
        if newest is None or newest <= change.at:
            return say(gettext_noop(
                "the person wrote the Past portrait by hand on %(day)s (“%(words)s”); keep their words in the new"
                " portrait, or leave it, unless a conversation after that says otherwise — cite that newer slice in refs"),
                day=f"{change.at:%Y-%m-%d}", words=_cut(change.words))
    return None


def _cut(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _newest_ref_time(profile: Profile, refs) -> datetime | None:
    keys = [r.replace("/", "-") for r in refs if isinstance(r, str)] if isinstance(refs, list) else []
    times = Slice.objects.filter(profile=profile, key__in=keys).values_list("last_message_at", flat=True)
    return max(times, default=None)


def rewrite_refusal(profile: Profile, card: Card, name: str, arguments: dict,
                    changes: list[Change] | None = None) -> str | None:
    """Why the agent may not make this call (a concrete reason), or None when it may."""
    changes = person_changes(profile) if changes is None else changes
    if not changes or not isinstance(arguments, dict):
        return None
    newest = _newest_ref_time(profile, arguments.get("refs"))
    words = arguments.get(_WORDS_OF.get(name, ""), "") if name != "set_identity" else (
        f"{arguments.get('field', '')}: {arguments.get('value', '')}")
    if isinstance(words, str) and words.strip():
        for change in changes:
            if change.part == "portrait" and name != "set_portrait":
                continue  # a portrait taken off bars only writing that portrait back
            if change.kind == "removed" and _similar(words, change.words) and (newest is None or newest <= change.at):
                return say(gettext_noop(
                    "the person removed “%(words)s” from the card on %(day)s; do not write it back unless a"
                    " conversation after that says so — cite that newer slice in refs"),
                    words=change.words, day=f"{change.at:%Y-%m-%d}")
    if name == "set_portrait":
        return _portrait_refusal(card, words, newest, changes)
    attr = _INDEX_OF.get(name)
    index = arguments.get("index")
    target = None
    if attr and isinstance(index, int):
        lines = [line for line in card_lines(card) if line.attr == attr]
        target = lines[index - 1].words if 0 < index <= len(lines) else None
    elif name == "set_identity":
        field = str(arguments.get("field", "")).casefold()
        target = next((line.words for line in card_lines(card)
                       if line.attr == "identity" and line.words.split(":", 1)[0].casefold() == field), None)
        if target is not None and _similar(target, words if isinstance(words, str) else ""):
            target = None  # the same line again: nothing of the person's is changed
    if target:
        for change in changes:
            if change.kind == "added" and _similar(target, change.words) and (newest is None or newest <= change.at):
                return say(gettext_noop(
                    "the person wrote “%(words)s” on the card by hand on %(day)s; leave it unless a conversation"
                    " after that says otherwise — cite that newer slice in refs"),
                    words=change.words, day=f"{change.at:%Y-%m-%d}")
    return None
