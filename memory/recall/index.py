"""The full-text index kept beside the archive (SPEC R2, D3).

Every function here runs inside the caller's transaction: the archive write and the
index write commit together, and so do a delete and its removal from the index.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import connection

from memory.models import Message, RecallDocument
from memory.recall.tokenize import tokenize

MAX_TOKEN_CHARS = 64  # longer "words" (URLs, base64…) are cut: PostgreSQL refuses lexemes > 2047 bytes


def _pkey(profile_id: int) -> str:
    return f"p{profile_id}"


def _indexable(tokens) -> list[str]:
    return [t[:MAX_TOKEN_CHARS] for t in tokens]


def index_messages(messages: Iterable[Message]) -> int:
    """Add (or refresh) the live messages among `messages`; returns how many were indexed."""
    docs = [
        RecallDocument(message_id=m.pk, profile_id=m.profile_id, tokens=" ".join(_indexable(tokenize(m.content))))
        for m in messages
        if m.deleted_at is None
    ]
    if not docs:
        return 0
    remove_messages([d.message_id for d in docs])
    RecallDocument.objects.bulk_create(docs, batch_size=500)
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_recall_fts(rowid, tokens, pkey) VALUES (%s, %s, %s)",
                [(d.message_id, d.tokens, _pkey(d.profile_id)) for d in docs],
            )
    return len(docs)


def remove_messages(message_ids: Sequence[int]) -> int:
    """Forget these messages in the index (hide, hard delete); unknown ids are ignored."""
    ids = list(message_ids)
    if not ids:
        return 0
    removed = 0
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        docs = list(RecallDocument.objects.filter(message_id__in=chunk).values_list("message_id", "profile_id", "tokens"))
        if not docs:
            continue
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                # A contentless FTS5 table forgets a row when given the values it indexed.
                cursor.executemany(
                    "INSERT INTO memory_recall_fts(memory_recall_fts, rowid, tokens, pkey) "
                    "VALUES ('delete', %s, %s, %s)",
                    [(mid, tokens, _pkey(pid)) for mid, pid, tokens in docs],
                )
        removed += RecallDocument.objects.filter(message_id__in=[d[0] for d in docs]).delete()[0]
    return removed


@dataclass(frozen=True)
class Hit:
    message_id: int
    score: float  # higher is better


def search(*, profile_id: int, tokens: Sequence[str], limit: int) -> list[Hit]:
    """The best `limit` messages of one profile for these query tokens, by the index's relevance."""
    terms = sorted(set(_indexable(tokens)))
    if not terms or limit <= 0:
        return []
    if connection.vendor == "sqlite":
        return _search_sqlite(profile_id, terms, limit)
    if connection.vendor == "postgresql":
        return _search_postgresql(profile_id, terms, limit)
    raise NotImplementedError(f"no full-text index for {connection.vendor}")


def _search_sqlite(profile_id: int, terms: list[str], limit: int) -> list[Hit]:
    query = f'pkey:"{_pkey(profile_id)}" AND tokens:(' + " OR ".join(f'"{t}"' for t in terms) + ")"
    with connection.cursor() as cursor:
        # bm25() is lower-is-better; the profile column weighs nothing.
        cursor.execute(
            "SELECT rowid, bm25(memory_recall_fts, 1.0, 0.0) AS s FROM memory_recall_fts "
            "WHERE memory_recall_fts MATCH %s ORDER BY s LIMIT %s",
            [query, limit],
        )
        return [Hit(message_id=row[0], score=-row[1]) for row in cursor.fetchall()]


def _search_postgresql(profile_id: int, terms: list[str], limit: int) -> list[Hit]:
    # Tokens are letters and digits only, so quoting each as a tsquery lexeme is exact.
    query = " | ".join(f"'{t}'" for t in terms)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT message_id, ts_rank(array_to_tsvector(string_to_array(tokens, ' ')), %s::tsquery) AS s"
            " FROM memory_recalldocument WHERE profile_id = %s"
            " AND array_to_tsvector(string_to_array(tokens, ' ')) @@ %s::tsquery"
            " ORDER BY s DESC, message_id DESC LIMIT %s",
            [query, profile_id, query, limit],
        )
        return [Hit(message_id=row[0], score=float(row[1])) for row in cursor.fetchall()]
