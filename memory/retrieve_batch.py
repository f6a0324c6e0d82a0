"""BENCH §1's retrieval protocol (`locomo-recall-v1`): load conversations, rank their questions.

Each conversation is archived through `archive_message`, the chat's own write path
(slices, index, statistics), into a throwaway user and profile, and every question is
ranked by `rank_messages`, the chat's own recall. All of it runs inside a transaction
that is rolled back, so nothing is ever committed to the database the command runs
against. Large inputs hold that database's write lock while they load: point
DATABASE_URL at a scratch database for them (`make bench` does).
"""

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction

from memory.archive import archive_message
from memory.models import Message, Profile
from memory.recall.index import optimize_index
from memory.recall.rank import rank_messages

FORMAT = "locomo-recall-v1"


class ProtocolError(ValueError):
    """The input is not a `locomo-recall-v1` document."""


def retrieve_batch(data: dict, *, k: int = 20, progress: Callable[[str], None] | None = None) -> dict:
    """Rank every query of every conversation: {"results": {qid: [doc ids]}, "latency_ms": {qid: ms}}."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ProtocolError(f'expected a JSON object with "format": "{FORMAT}"')
    results: dict[str, list[str]] = {}
    latency: dict[str, float] = {}
    for conversation in data.get("conversations", []):
        with transaction.atomic():
            ranked, ms = _conversation(conversation, k, progress)
            results.update(ranked)
            latency.update(ms)
            transaction.set_rollback(True)  # a throwaway profile: nothing is committed
    return {"results": results, "latency_ms": latency}


def _conversation(conv: dict, k: int, progress) -> tuple[dict[str, list[str]], dict[str, float]]:
    user = get_user_model().objects.create(username=f"retrieve-batch-{uuid.uuid4().hex[:12]}")
    profile = Profile.objects.create(user=user, key="retrieve-batch")
    speaker_a, speaker_b = conv.get("speaker_a", ""), conv.get("speaker_b", "")
    docs = conv.get("docs", [])
    began = time.perf_counter()
    doc_of = load_conversation(profile, conv)
    optimize_index()  # as after an import: PostgreSQL plans with statistics that know these rows
    if progress:
        progress(f"{conv.get('id', '?')}: {len(docs)} docs loaded in {time.perf_counter() - began:.1f}s")
    names = {name: speaker for name, speaker in ((speaker_a, "user"), (speaker_b, "assistant")) if name}
    newest_first = [str(d["id"]) for d in reversed(docs)]
    return rank_queries(profile.pk, conv.get("queries", []), doc_of, k=k, names=names, fill=newest_first)


def rank_queries(
    profile_id: int, queries: list[dict], doc_of: dict[int, str], *, k: int, names: dict[str, str],
    fill: list[str],
) -> tuple[dict[str, list[str]], dict[str, float]]:
    """Rank each query over the profile with the chat's recall: ({qid: doc ids}, {qid: ms}),
    the latency of `rank_messages` alone (the protocol's latency figures; BENCH §2 reads them
    on a large archive too)."""
    results, latency = {}, {}
    for q in queries:
        t0 = time.perf_counter()
        hits = rank_messages(profile_id=profile_id, query=q["question"], limit=k, speaker_names=names)
        latency[q["qid"]] = round((time.perf_counter() - t0) * 1000, 3)
        ids = [doc_of[h.message_id] for h in hits if h.message_id in doc_of]
        results[q["qid"]] = _at_least(ids, k, fill)
    return results, latency


def load_conversation(profile: Profile, conv: dict) -> dict[int, str]:
    """Archive a protocol conversation's docs into `profile` through the chat's write path
    (speaker_b's lines as the companion's, a new slice where the session changes, the image
    caption after the text): {message id: doc id}."""
    speaker_b = conv.get("speaker_b", "")
    doc_of: dict[int, str] = {}
    session = object()
    for n, doc in enumerate(conv.get("docs", [])):
        text = doc.get("text", "")
        if doc.get("image_caption"):
            text = f"{text}\n{doc['image_caption']}"
        archived = archive_message(
            profile=profile,
            mid=f"d_{n}",
            speaker=Message.Speaker.ASSISTANT if doc.get("speaker") == speaker_b else Message.Speaker.USER,
            content=text,
            created_at=_timestamp(doc.get("timestamp"), n),
            tz="UTC",
            new_conversation=n > 0 and doc.get("session", session) != session,
        )
        session = doc.get("session", session)
        doc_of[archived.message.pk] = str(doc["id"])
    return doc_of


def _at_least(ids: list[str], k: int, fill: list[str]) -> list[str]:
    """The protocol wants k ids when the conversation has them: pad with the newest unranked."""
    if len(ids) >= k:
        return ids
    seen = set(ids)
    return ids + [d for d in fill if d not in seen][: k - len(ids)]


def _timestamp(value: str | None, n: int) -> datetime:
    if not value:
        return datetime(2000, 1, 1, tzinfo=UTC) + timedelta(minutes=n)
    at = datetime.fromisoformat(value)
    return at if at.tzinfo else at.replace(tzinfo=UTC)
