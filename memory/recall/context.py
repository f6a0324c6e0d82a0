"""What the companion remembers for one turn (SPEC R2-R4): the context around the ranking.

Relevance first: `rank.rank_messages` (the LoCoMo-measured production ranking) over the
profile's whole archive. Recency only where the message asks about time ("yesterday",
"last time", "上次", "昨天"…): then the asked-for day is searched too, or relevance is
fused with recency (BENCH.md §1: fusing recency into every query hurts recall). Then the
top highlights and experiences (R3), everything cut by a token budget (R4).
"""

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from memory.models import Experience, Highlight, LoreEntry, Message, Profile
from memory.recall.budget import approx_tokens
from memory.recall.rank import rank_messages
from memory.recall.tokenize import tokenize

SEARCH_LIMIT = 20  # ranked lines fetched per turn (more than the budget holds); bounded (O2)
# Columns a recalled line never needs in a prompt: not loaded (JSON decoding is per row).
UNUSED_COLUMNS = ("raw_content", "attachment", "legacy_extra", "legacy_key", "source_id", "sync_status")
WINDOW_LIMIT = 20  # messages fetched from an asked-for day
CURATED_SCAN_LIMIT = 2000  # newest live highlights/experiences scored in Python (v1)
TOP_HIGHLIGHTS, TOP_ACTIVE, TOP_CANDIDATES = 3, 3, 2  # SPEC R3
ITEM_OVERHEAD_TOKENS = 12  # labels around each item in the prompt (speaker, time, id)
RRF_K = 60

# Phrases that ask about a day: (pattern, first day offset, last day offset), offsets from today.
_DAY_PHRASES = (
    (r"day before yesterday|前天", -2, -2),
    (r"yesterday|昨天|昨晚|昨日", -1, -1),
    (r"\btoday\b|\btonight\b|this morning|今天|今晚|今早|今日", 0, 0),
    (r"last week|上周|上星期|上个星期", -7, -1),
)
# Phrases that ask about "the last time" without naming a day.
_RECENT_PHRASES = r"last time|recently|the other day|earlier today|上次|上回|最近|前几天|刚才"


@dataclass(frozen=True)
class TimeHint:
    start: datetime | None = None  # a window of days the message asks about
    end: datetime | None = None
    recent: bool = False  # "last time": fuse relevance with recency


@dataclass
class Recalled:
    fragments: list[Message] = field(default_factory=list)
    highlights: list[Highlight] = field(default_factory=list)
    active: list[Experience] = field(default_factory=list)
    candidates: list[Experience] = field(default_factory=list)
    lore: list[LoreEntry] = field(default_factory=list)  # H2: lorebook entries the last turns called for
    tokens: int = 0  # approximate tokens spent of the budget


def time_hint(query: str, now: datetime) -> tuple[TimeHint | None, str]:
    """Whether the message asks about time, and the message without its time words."""
    text = query.lower()
    for pattern, first, last in _DAY_PHRASES:
        if re.search(pattern, text):
            day = now.replace(hour=0, minute=0, second=0, microsecond=0)
            start, end = day + timedelta(days=first), day + timedelta(days=last + 1)
            return TimeHint(start=start, end=end), re.sub(pattern, " ", text)
    if re.search(_RECENT_PHRASES, text):
        return TimeHint(recent=True), re.sub(_RECENT_PHRASES, " ", text)
    return None, query


def recall(
    *,
    profile: Profile,
    query: str,
    now: datetime,
    exclude_ids: Iterable[int] = (),
    budget: int | None = None,
    lore: Sequence[LoreEntry] = (),
) -> Recalled:
    """Memory fragments, highlights and experiences relevant to `query`, within the token budget.

    `now` is the user's local time (aware); `exclude_ids` are message pks already in the
    prompt (the current turn, the recent turns); `lore` the lorebook entries the last turns
    called for (`memory.lorebook.matching_entries`), which share the budget. A constant number
    of queries (O2).
    """
    budget = settings.PREVIOUSLY_CONTEXT_TOKENS if budget is None else budget
    hint, content_query = time_hint(query, now)
    exclude = set(exclude_ids)
    fragments = _rank_messages(profile, content_query, now, hint, exclude)
    query_tokens = set(tokenize(content_query))
    highlights, experiences = (
        Highlight.objects.recall_pool(profile.pk, limit=CURATED_SCAN_LIMIT) if query_tokens else ([], [])
    )
    highlights = _top(highlights, query_tokens, lambda h: h.content, TOP_HIGHLIGHTS)
    active = _top(
        [e for e in experiences if e.status == Experience.Status.ACTIVE],
        query_tokens,
        lambda e: f"{e.title} {e.content}",
        TOP_ACTIVE,
    )
    candidates = _top(
        [e for e in experiences if e.status == Experience.Status.CANDIDATE],
        query_tokens,
        lambda e: f"{e.title} {e.content}",
        TOP_CANDIDATES,
    )
    return _within_budget(budget, active, highlights, fragments, candidates, lore)


def _rank_messages(profile, query, now, hint, exclude) -> list[Message]:
    names = {profile.name: Message.Speaker.ASSISTANT} if profile.name else None
    hits = rank_messages(
        profile_id=profile.pk, query=query, limit=SEARCH_LIMIT + len(exclude), now=now, speaker_names=names
    )
    score = {h.message_id: h.score for h in hits}
    wanted = [pk for pk in score if pk not in exclude]
    found = {m.pk: m for m in Message.objects.live_among(profile.pk, wanted, defer=UNUSED_COLUMNS)} if wanted else {}
    by_relevance = sorted(
        found.values(), key=lambda m: (-round(score[m.pk], 9), -m.created_at.timestamp(), -m.pk)
    )
    if hint is None:
        return by_relevance
    live = Message.objects.for_profile(profile).live().exclude(message_type=Message.Type.SYSTEM).defer(*UNUSED_COLUMNS)
    if hint.start is not None:
        window = list(
            live.filter(created_at__gte=hint.start, created_at__lt=hint.end)
            .exclude(pk__in=exclude)
            .order_by("-created_at", "-id")[:WINDOW_LIMIT]
        )
        in_window = {m.pk for m in window}
        # Relevant lines of the asked-for day first, then the rest of that day, then the others.
        first = [m for m in by_relevance if m.pk in in_window]
        rest_of_day = [m for m in window if m.pk not in found]
        later = [m for m in by_relevance if m.pk not in in_window]
        return first + rest_of_day + later
    # "Last time": reciprocal rank fusion of relevance with recency, among the relevant lines
    # and the newest lines (which may share no word with the question).
    newest = list(live.exclude(pk__in=exclude).order_by("-created_at", "-id")[:WINDOW_LIMIT])
    pool = {m.pk: m for m in [*by_relevance, *newest]}
    rel_rank = {m.pk: i for i, m in enumerate(by_relevance)}
    by_time = sorted(pool.values(), key=lambda m: (m.created_at, m.pk), reverse=True)
    fused = {
        m.pk: 1 / (RRF_K + i) + (1 / (RRF_K + rel_rank[m.pk]) if m.pk in rel_rank else 0)
        for i, m in enumerate(by_time)
    }
    return sorted(pool.values(), key=lambda m: (-fused[m.pk], -m.created_at.timestamp()))


def _top(items: Iterable, query_tokens: set[str], text_of, n: int) -> list:
    """The n items sharing most query tokens (weighted down for long texts); ties: newest first."""
    if not query_tokens:
        return []
    scored = []
    for position, item in enumerate(items):
        doc = set(tokenize(text_of(item)))
        overlap = len(doc & query_tokens)
        if overlap:
            scored.append((-(overlap / math.sqrt(len(doc))), position, item))
    scored.sort(key=lambda s: (s[0], s[1]))
    return [item for _, _, item in scored[:n]]


def _within_budget(budget: int, active, highlights, fragments, candidates, lore=()) -> Recalled:
    """Fill the budget by priority: lorebook entries the words called for (H2), confirmed
    experiences, highlights, fragments, candidates."""
    out = Recalled()

    def take(items: Sequence, text_of, into: list) -> None:
        for item in items:
            cost = approx_tokens(text_of(item)) + ITEM_OVERHEAD_TOKENS
            if out.tokens + cost <= budget:
                into.append(item)
                out.tokens += cost

    take(lore, lambda e: e.content, out.lore)
    take(active, lambda e: f"{e.title} {e.content}", out.active)
    take(highlights, lambda h: h.content, out.highlights)
    take(fragments, lambda m: m.content, out.fragments)
    take(candidates, lambda e: f"{e.title} {e.content}", out.candidates)
    return out
