"""The full-text index kept beside the archive (SPEC R2, D3, O2).

Every function here runs inside the caller's transaction: the archive write and the
index write commit together, and so do a delete and its removal from the index. The one
exception is `optimize_index` after a bulk load, which merges in short writes of its own.

Per message: a RecallDocument (analysed tokens, position in the profile, slice, speaker,
local day). Per profile: RecallTerm (document frequency of each term) and RecallStats
(documents, tokens, next position). On SQLite the tokens also go into a contentless FTS5
table, each prefixed with the profile (`p12x` + term), so a posting list never holds
another profile's messages and the work of a query is bounded by that profile's
document frequencies. On PostgreSQL a GIN index covers RecallDocument.tokens.
"""

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from django.db import connection, transaction

from memory.models import Message, RecallDocument
from memory.models.archive import legacy_sql
from memory.recall import vectors
from memory.recall.tokenize import tokenize

_CHUNK = 500


@dataclass(frozen=True)
class Hit:
    message_id: int
    score: float  # higher is better


def fts_terms(profile_id: int, tokens: Iterable[str]) -> list[str]:
    """The SQLite FTS5 spelling of a profile's terms (letters and digits only, one FTS token each)."""
    prefix = f"p{profile_id}x"
    return [prefix + t for t in tokens]


@dataclass(frozen=True, slots=True)
class Analysis:
    """One line's index entry worked out in advance, so that a bulk import does this work
    before its batch's transaction and holds SQLite's write lock for the writes alone (S4)."""

    n_tokens: int
    text: str  # RecallDocument.tokens
    fts: str  # its FTS5 row (SQLite)
    terms: frozenset[str]  # distinct, for the document frequencies


def analysis(profile_id: int, tokens: list[str]) -> Analysis:
    return Analysis(n_tokens=len(tokens), text=" ".join(tokens), fts=" ".join(fts_terms(profile_id, tokens)),
                    terms=frozenset(tokens))


def index_messages(
    messages: Iterable[Message],
    *,
    new: bool = False,
    embed: bool = False,
    analysed: Mapping[int, Analysis] | None = None,
) -> int:
    """Add (or refresh) the live messages among `messages`; returns how many were indexed.

    `new=True` promises they were just created (never indexed), which saves a lookup on
    the archive write's hot path. `embed=True` also stores their sentence vectors in this
    transaction (the chat's write path); bulk loads leave that to `manage.py embed_backfill`.
    `analysed`: message pk -> its `analysis()`, worked out already (a bulk import does it
    before its transaction); a message not in it is analysed here."""
    live = sorted((m for m in messages if m.deleted_at is None), key=lambda m: (m.created_at, m.pk))
    if not live:
        return 0
    kept_pos = {} if new else {mid: pos for mid, (_, pos) in _remove([m.pk for m in live]).items()}  # same place
    analysed = analysed or {}
    entry = {m.pk: analysed.get(m.pk) or analysis(m.profile_id, tokenize(m.content)) for m in live}
    by_profile: dict[int, list[Message]] = defaultdict(list)
    for m in live:
        by_profile[m.profile_id].append(m)
    docs = []
    for profile_id, msgs in by_profile.items():
        fresh = [m for m in msgs if m.pk not in kept_pos]
        n_tokens = sum(entry[m.pk].n_tokens for m in msgs)
        next_pos = _bump_stats(profile_id, docs=len(msgs), tokens=n_tokens, positions=len(fresh))
        pos = dict(kept_pos)
        pos.update({m.pk: next_pos - len(fresh) + i for i, m in enumerate(fresh)})
        # Rows as tuples, not RecallDocument instances: a bulk import indexes tens of thousands.
        docs.extend(
            (m.pk, profile_id, entry[m.pk].text, pos[m.pk], m.slice_id, m.speaker,
             m.local_day_key or m.created_at.date().isoformat())
            for m in msgs
        )
        df = Counter()
        for m in msgs:
            df.update(entry[m.pk].terms)
        _bump_terms(profile_id, df, +1)
    with connection.cursor() as cursor:
        # Plain SQL rather than bulk_create: this runs on every archive write (BENCH §2).
        cursor.executemany(
            "INSERT INTO memory_recalldocument (message_id, profile_id, tokens, pos, slice_id, speaker, day)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)",
            docs,
        )
        if connection.vendor == "sqlite":
            cursor.executemany(
                "INSERT INTO memory_recall_fts(rowid, terms) VALUES (%s, %s)",
                [(d[0], entry[d[0]].fts) for d in docs],
            )
    if embed:
        vectors.embed_and_store(live, new=new)
    if kept_pos:  # re-indexed (unhidden, edited): the lines after them were embedded with the old text
        ids = {m.pk for m in live}
        vectors.refresh_followers(
            [mid for mid in vectors.followers((d[1], d[3]) for d in docs if d[0] in kept_pos) if mid not in ids]
        )
    return len(docs)


# Each step of the full-text merge writes about this many leaf pages, so it holds SQLite's write
# lock for milliseconds: one 'optimize' of a 127k-line history held it ~230 ms, and it grows
# with the whole index (BENCH §5: another person's turn waited for it).
MERGE_PAGES = 200


# The tables whose planner statistics a bulk load refreshes on PostgreSQL (optimize_index).
ANALYZED_AFTER_A_LOAD = ("memory_message", "memory_recalldocument", "memory_recallterm", "memory_recallvector")


def optimize_index(*, between: Callable[[], None] | None = None) -> None:
    """After a bulk load (imports): merge SQLite's full-text segments; on PostgreSQL refresh
    the planner's statistics at once (ANALYZE), so queries do not scan by profile until
    autovacuum gets round to it.

    On SQLite the merge is FTS5's incremental one, MERGE_PAGES pages a step until a step finds
    nothing to merge (the same single segment 'optimize' leaves). Outside a transaction each
    step is its own short write, and `between()` runs after each (an import leaves the
    lock free there, S4); inside one the steps follow each other."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            while True:
                with transaction.atomic():
                    before = connection.connection.total_changes
                    cursor.execute("INSERT INTO memory_recall_fts(memory_recall_fts, rank) VALUES ('merge', %s)",
                                   [-MERGE_PAGES])
                    # FTS5: a step that merged anything changes two rows or more.
                    merged = connection.connection.total_changes - before >= 2
                if not merged:
                    return
                if between is not None:
                    between()
        elif connection.vendor == "postgresql":
            cursor.execute(f"ANALYZE {', '.join(ANALYZED_AFTER_A_LOAD)}")


def remove_messages(message_ids: Sequence[int]) -> int:
    """Forget these messages in the index (hide, hard delete); unknown ids are ignored. The
    line after each is re-embedded: its vector was made with the removed line as context."""
    removed = _remove(list(message_ids))
    vectors.refresh_followers(vectors.followers(removed.values()))
    return len(removed)


def _remove(ids: list[int]) -> dict[int, tuple[int, int]]:
    """Remove indexed messages with their statistics; returns {message id: (profile id, position)}."""
    removed: dict[int, tuple[int, int]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        docs = list(
            RecallDocument.objects.filter(message_id__in=chunk).values_list(
                "message_id", "profile_id", "tokens", "pos"
            )
        )
        if not docs:
            continue
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                # A contentless FTS5 table forgets a row when given the values it indexed.
                cursor.executemany(
                    "INSERT INTO memory_recall_fts(memory_recall_fts, rowid, terms) VALUES ('delete', %s, %s)",
                    [(mid, " ".join(fts_terms(pid, tokens.split()))) for mid, pid, tokens, _ in docs],
                )
        by_profile: dict[int, list[list[str]]] = defaultdict(list)
        for _, pid, tokens, _ in docs:
            by_profile[pid].append(tokens.split())
        for pid, streams in by_profile.items():
            _bump_stats(pid, docs=-len(streams), tokens=-sum(map(len, streams)), positions=0)
            _bump_terms(pid, Counter(t for s in streams for t in set(s)), -1)
        RecallDocument.objects.filter(message_id__in=[d[0] for d in docs]).delete()
        vectors.remove(d[0] for d in docs)
        removed.update({mid: (pid, pos) for mid, pid, _, pos in docs})
    return removed


def _bump_stats(profile_id: int, *, docs: int, tokens: int, positions: int) -> int:
    """Add to a profile's collection statistics; returns its next free position."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_recallstats (profile_id, n_docs, n_tokens, next_pos) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (profile_id) DO UPDATE SET"
            " n_docs = memory_recallstats.n_docs + excluded.n_docs,"
            " n_tokens = memory_recallstats.n_tokens + excluded.n_tokens,"
            " next_pos = memory_recallstats.next_pos + excluded.next_pos"
            " RETURNING next_pos",
            [profile_id, docs, tokens, positions],
        )
        return cursor.fetchone()[0]


def _bump_terms(profile_id: int, df: Counter, sign: int) -> None:
    if not df:
        return
    with connection.cursor() as cursor:
        if sign > 0:
            cursor.executemany(
                "INSERT INTO memory_recallterm (profile_id, term, df) VALUES (%s, %s, %s)"
                " ON CONFLICT (profile_id, term) DO UPDATE SET df = memory_recallterm.df + excluded.df",
                # In the index's order: the B-tree's pages are visited once each, in turn
                # (a bulk import's batch bumps thousands of terms inside its transaction).
                [(profile_id, t, n) for t, n in sorted(df.items())],
            )
            return
        cursor.executemany(
            "UPDATE memory_recallterm SET df = df - %s WHERE profile_id = %s AND term = %s",
            [(n, profile_id, t) for t, n in df.items()],
        )
        terms = list(df)
        for start in range(0, len(terms), _CHUNK):
            part = terms[start : start + _CHUNK]
            cursor.execute(
                "DELETE FROM memory_recallterm WHERE profile_id = %s AND df <= 0 AND term IN ("
                + ", ".join(["%s"] * len(part))
                + ")",
                [profile_id, *part],
            )


def search(*, profile_id: int, tokens: Sequence[str], limit: int) -> list[Hit]:
    """The best `limit` messages of one profile for these query tokens, by the index's relevance."""
    terms = sorted(set(tokens))
    if not terms or limit <= 0:
        return []
    return [Hit(message_id=c.message_id, score=c.score) for c in candidates(profile_id, terms, limit)]


@dataclass
class Candidate:
    """A message as the rerank sees it."""

    message_id: int
    score: float
    pos: int
    slice_id: int
    speaker: str
    day: str
    terms: str  # its analysed tokens as stored, space-separated

    @cached_property
    def tokens(self) -> list[str]:
        """Split only when read (the time boost of "when" questions): a question ranks some 500
        candidates, and splitting them all cost more than the rest of the rerank (BENCH §2)."""
        return self.terms.split()


_DOC_COLUMNS = "d.message_id, d.pos, d.slice_id, d.speaker, d.day, d.tokens"


def candidates(
    profile_id: int, terms: Sequence[str], limit: int, days: tuple[str, str] | None = None
) -> list[Candidate]:
    """First stage: one query for the profile's best `limit` live messages matching any term;
    with `days` (first, last local day, YYYY-MM-DD) only lines said then compete."""
    if not terms or limit <= 0:
        return []
    if connection.vendor == "sqlite":
        match = " OR ".join(f'"{t}"' for t in fts_terms(profile_id, dict.fromkeys(terms)))
        if not days:
            # Fast path: the index's own best `limit` matches, then this profile's among them.
            # The index holds every profile's lines, so when another profile's lines filled the
            # `limit` (a big import) this profile's are looked for among its own alone.
            found, full = _fts_best(match, limit, profile_id)
            if not full or len(found) >= limit:
                return found
        sql = (
            f"SELECT {_DOC_COLUMNS}, -bm25(memory_recall_fts) AS s FROM memory_recall_fts"
            " JOIN memory_recalldocument d ON d.message_id = memory_recall_fts.rowid"
            " JOIN memory_message m ON m.id = d.message_id"
            " WHERE memory_recall_fts MATCH %s AND d.profile_id = %s AND m.deleted_at IS NULL" + legacy_sql("m") +
            (" AND d.day >= %s AND d.day <= %s" if days else "") + " ORDER BY s DESC, d.pos DESC LIMIT %s"
        )
        params = [match, profile_id, *(days or ()), limit]
    elif connection.vendor == "postgresql":
        sql, params = _bm25_postgresql(profile_id, list(dict.fromkeys(terms)), limit, days)
    else:
        raise NotImplementedError(f"no full-text index for {connection.vendor}")
    return _candidates(sql, params)


def _fts_best(match: str, limit: int, profile_id: int) -> tuple[list[Candidate], bool]:
    """The index's best `limit` matches of any profile (FTS5's own ORDER BY bm25 LIMIT), kept for
    `profile_id`; and whether the index gave all `limit` (others may have crowded it out)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rowid, -bm25(memory_recall_fts) FROM memory_recall_fts WHERE memory_recall_fts"
                       " MATCH %s ORDER BY bm25(memory_recall_fts) LIMIT %s", [match, limit])
        best = dict(cursor.fetchall())
        if not best:
            return [], False
        # `+d.profile_id`: SQLite's planner took the profile's index and walked every line of the
        # profile for the few hundred ids (13 ms a question at 100k lines, issue 24 point 10);
        # the unary + keeps that term off any index, so the ids are looked up by primary key.
        cursor.execute(
            f"SELECT {_DOC_COLUMNS} FROM memory_recalldocument d JOIN memory_message m ON m.id = d.message_id"
            f" WHERE d.message_id IN ({', '.join(['%s'] * len(best))}) AND +d.profile_id = %s"
            " AND m.deleted_at IS NULL" + legacy_sql("m"), [*best, profile_id])
        found = [Candidate(mid, float(best[mid]), pos, sid, speaker, day, tokens)
                 for mid, pos, sid, speaker, day, tokens in cursor.fetchall()]
    found.sort(key=lambda c: (-c.score, -c.pos))
    return found, len(best) >= limit


def _candidates(sql: str, params: list) -> list[Candidate]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [
            Candidate(mid, float(s), pos, sid, speaker, day, tokens)
            for mid, pos, sid, speaker, day, tokens, s in cursor.fetchall()
        ]


# SQLite FTS5's bm25() parameters and formula, reproduced on PostgreSQL (issue 18):
# score = sum over query terms of idf × tf × (k1 + 1) / (tf + k1 × (1 − b + b × len / avglen)),
# idf = ln((N − df + 0.5) / (df + 0.5)), at least 1e-6 (FTS5's floor for common terms).
BM25_K1 = 1.2
BM25_B = 0.75


def _bm25_postgresql(
    profile_id: int, terms: list[str], limit: int, days: tuple[str, str] | None = None
) -> tuple[str, list]:
    """The candidates query on PostgreSQL: the GIN index finds the profile's documents holding
    any term; BM25 from the kept statistics (RecallStats, RecallTerm) ranks them."""
    # Tokens are letters and digits only, so quoting each as a tsquery lexeme is exact.
    query = " | ".join(f"'{t}'" for t in terms)
    values = ", ".join(["(%s)"] * len(terms))
    sql = (
        "WITH st AS (SELECT n_docs::float8 AS n, GREATEST(n_tokens::float8 / GREATEST(n_docs, 1), 1e-9) AS avglen"
        "  FROM memory_recallstats WHERE profile_id = %s),"
        f" q(term) AS (VALUES {values}),"
        " w AS MATERIALIZED (SELECT q.term, GREATEST(ln((st.n - t.df + 0.5) / (t.df + 0.5)), 1e-6) AS idf"
        "  FROM q JOIN memory_recallterm t ON t.profile_id = %s AND t.term = q.term CROSS JOIN st),"
        " hit AS MATERIALIZED (SELECT d.message_id, string_to_array(d.tokens, ' ') AS toks"
        "  FROM memory_recalldocument d WHERE d.profile_id = %s"
        "  AND array_to_tsvector(string_to_array(d.tokens, ' ')) @@ %s::tsquery"
        + (" AND d.day >= %s AND d.day <= %s" if days else "")
        + ")"
        f" SELECT {_DOC_COLUMNS}, s.score FROM ("
        "  SELECT hit.message_id, SUM(w.idf * x.tf * %s / (x.tf + %s * (1 - %s + %s * cardinality(hit.toks) / st.avglen))) AS score"
        "  FROM hit CROSS JOIN st CROSS JOIN w"
        "  CROSS JOIN LATERAL (SELECT cardinality(array_positions(hit.toks, w.term::text))::float8 AS tf) x"
        "  WHERE x.tf > 0 GROUP BY hit.message_id) s"
        " JOIN memory_recalldocument d ON d.message_id = s.message_id"
        " JOIN memory_message m ON m.id = d.message_id WHERE m.deleted_at IS NULL" + legacy_sql("m") +
        " ORDER BY s.score DESC, d.pos DESC LIMIT %s"
    )
    k1, b = BM25_K1, BM25_B
    span = list(days) if days else []
    return sql, [profile_id, *terms, profile_id, profile_id, query, *span, k1 + 1, k1, b, b, limit]


def _documents(where: str, params: list) -> list[Candidate]:
    """Indexed messages matching `where` (over `d`, the document, and `m`, its message), score 0."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_DOC_COLUMNS} FROM memory_recalldocument d JOIN memory_message m ON m.id = d.message_id"
            f" WHERE {where}",
            params,
        )
        rows = cursor.fetchall()
    return [Candidate(mid, 0.0, pos, sid, sp, day, toks) for mid, pos, sid, sp, day, toks in rows]


def documents_at(profile_id: int, positions: Iterable[int]) -> list[Candidate]:
    """The profile's indexed messages at these positions (neighbours of hits), score 0."""
    wanted = sorted(set(positions))
    if not wanted:
        return []
    return _documents("d.profile_id = %s AND d.pos IN (" + ", ".join(["%s"] * len(wanted)) + ")", [profile_id, *wanted])


def documents_for(message_ids: Iterable[int]) -> list[Candidate]:
    """The indexed, live messages among these ids (vector hits), score 0. Both tables are read by
    their keys: with `d.message_id` alone, PostgreSQL without fresh statistics (a new or fast
    growing archive; autovacuum off) took `deleted_at IS NULL` for one row and scanned every
    message once per document, 10–30 ms a question at a few hundred lines (BENCH §4)."""
    wanted = sorted(set(message_ids))
    if not wanted:
        return []
    ids = ", ".join(["%s"] * len(wanted))
    where = f"m.deleted_at IS NULL{legacy_sql('m')} AND m.id IN ({ids}) AND d.message_id IN ({ids})"
    return _documents(where, [*wanted, *wanted])


def terms_containing(profile_id: int, character: str, limit: int = 200) -> dict[str, int]:
    """{indexed term: df} of the profile's CJK bigrams holding `character`, rarest first: a
    one-character question is looked up through them, since only bigrams are indexed."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT term, df FROM memory_recallterm WHERE profile_id = %s AND (term LIKE %s OR term LIKE %s)"
            " ORDER BY df, term LIMIT %s",
            [profile_id, character + "_", "_" + character, limit],
        )
        return dict(cursor.fetchall())


def document_frequencies(profile_id: int, terms: Sequence[str]) -> dict[str, int]:
    """{term: number of the profile's indexed messages holding it} for the known terms."""
    if not terms:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT term, df FROM memory_recallterm WHERE profile_id = %s AND term IN ("
            + ", ".join(["%s"] * len(terms))
            + ")",
            [profile_id, *terms],
        )
        return dict(cursor.fetchall())


def forget_profile(profile_id: int) -> int:
    """Drop a whole profile from the index (the profile is being deleted); returns documents dropped.

    RecallDocument/RecallTerm/RecallStats rows go with the profile's cascade; only SQLite's
    contentless FTS5 table needs telling, row by row, with the terms it indexed."""
    docs = RecallDocument.objects.filter(profile_id=profile_id).values_list("message_id", "tokens")
    dropped = 0
    if connection.vendor == "sqlite":
        batch: list[tuple[int, str]] = []
        with connection.cursor() as cursor:
            for mid, tokens in docs.iterator(chunk_size=2000):
                batch.append((mid, " ".join(fts_terms(profile_id, tokens.split()))))
                if len(batch) >= 2000:
                    cursor.executemany(_FTS_DELETE, batch)
                    dropped += len(batch)
                    batch = []
            if batch:
                cursor.executemany(_FTS_DELETE, batch)
                dropped += len(batch)
    else:
        dropped = docs.count()
    RecallDocument.objects.filter(profile_id=profile_id).delete()
    return dropped


_FTS_DELETE = "INSERT INTO memory_recall_fts(memory_recall_fts, rowid, terms) VALUES ('delete', %s, %s)"
