"""BENCH §2, recall alone on an archive whose wording repeats (issue 24 point 10).

People say the same things often, which makes every term's posting list long. The archive is
LoCoMo's turns (all ten conversations, in order) repeated until it reaches the size, each
repetition with a short suffix (" ·2", " ·3", …), so at 100k lines each line recurs about 17
times. It is loaded as an import loads (bulk rows, the index, the sentence vectors of the
shipped embedder, `optimize_index`) into one profile of the scratch database, grown from the
smaller size to the larger, and LoCoMo's own questions are ranked with the chat's recall
(hybrid as shipped) through `memory.retrieve_batch.rank_queries`: the latency figures of the
protocol command, per question.

Bar: p50 at 100k ≤ 1.5 × p50 at 10k, and ≤ 15 ms.

`python -m bench.repeat_cli --profile` runs it alone and prints cProfile's top lines at the largest size.
"""

import cProfile
import io
import os
import pstats
import statistics
import time

import numpy as np
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from bench.machine import load_average
from memory.models import Message, Profile, Slice
from memory.recall import embedding, vectors
from memory.recall.index import index_messages, optimize_index
from memory.retrieve_batch import rank_queries

BATCH = 5000


def lines(data: dict):
    """(conversation index, doc, repetition) forever: LoCoMo's turns over and over."""
    rep = 0
    while True:
        rep += 1
        for c, conv in enumerate(data["conversations"]):
            for doc in conv["docs"]:
                yield c, doc, rep


def _text(doc: dict, rep: int) -> str:
    text = doc["text"].split(": ", 1)[-1]
    if doc.get("image_caption"):
        text = f"{text}\n{doc['image_caption']}"
    return text if rep == 1 else f"{text} ·{rep}"


def _store_vectors(msgs: list[Message], vector_of: dict) -> None:
    """The shipped embedder's vectors (line + previous line, `vectors.contextual_rows`): a repeat
    takes its first occurrence's vector (its suffix is two characters), so 100k lines cost
    LoCoMo's 5,882 embeddings, not 100k; the ranking that reads them is the shipped one."""
    embedder = embedding.current()
    if embedder is None:
        return
    pairs = vectors.contexts(msgs)
    keys = [(prev.rsplit(" ·", 1)[0], line.rsplit(" ·", 1)[0]) for prev, line in pairs]
    todo = list(dict.fromkeys(k for k in keys if k not in vector_of))
    if todo:
        vector_of.update(zip(todo, vectors.contextual_rows(todo, embedder), strict=True))
    vectors.store(msgs, np.stack([vector_of[k] for k in keys]), model=vectors.model_tag(embedder))


def grow(profile: Profile, data: dict, source, have: int, size: int, vector_of: dict) -> float:
    """Add lines until the profile holds `size`, as an import does; seconds taken."""
    began = time.perf_counter()
    start = timezone.now() - timezone.timedelta(days=2000)
    slice_of: dict = {}
    for first in range(have, size, BATCH):
        rows = []
        for i in range(first, min(size, first + BATCH)):
            c, doc, rep = next(source)
            at = start + timezone.timedelta(minutes=i)
            key = (c, doc["session"], rep)
            if key not in slice_of:
                slice_of.clear()  # sessions follow one another: only the current one is open
                slice_of[key] = Slice(profile=profile, key=at.strftime("%Y-%m-%d-%H%M"), started_at=at, last_message_at=at,
                                      ended_at=at, close_reason="import")
            speaker = "assistant" if doc["speaker"] == data["conversations"][c]["speaker_b"] else "user"
            rows.append(Message(profile=profile, slice=slice_of[key], mid=f"r_{i:014x}", created_at=at,
                                content=_text(doc, rep), speaker=speaker, local_day_key=at.date().isoformat()))
        with transaction.atomic():
            Slice.objects.bulk_create([s for s in {id(s): s for s in (m.slice for m in rows)}.values() if s.pk is None])
            for m in rows:
                m.slice_id = m.slice.pk
            msgs = Message.objects.bulk_create(rows, batch_size=1000)
            index_messages(msgs, new=True)
            _store_vectors(msgs, vector_of)
    optimize_index()
    return time.perf_counter() - began


def queries(data: dict, n: int) -> list[tuple[dict, dict]]:
    """Up to `n` of LoCoMo's questions, spread over the ten conversations: (conversation, query)."""
    each = max(1, n // len(data["conversations"]))
    return [(conv, q) for conv in data["conversations"] for q in conv["queries"][:each]]


def measure(profile: Profile, asked: list[tuple[dict, dict]], rounds: int) -> dict:
    """Per-question latency (ms) of `rank_queries`, the median of `rounds` passes per question;
    beside it the process's CPU time per question (on a loaded machine the wall time also holds
    the time this process waited for a core)."""
    per_q: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for _ in range(rounds):
        for conv, q in asked:
            names = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
            began = time.process_time()
            _, ms = rank_queries(profile.pk, [q], {}, k=20, names=names, fill=[])
            cpu.setdefault(q["qid"], []).append((time.process_time() - began) * 1000)
            per_q.setdefault(q["qid"], []).extend(ms.values())
    values = sorted(statistics.median(v) for v in per_q.values())
    return {"p50_ms": round(statistics.median(values), 2),
            "p99_ms": round(values[min(len(values) - 1, round(0.99 * (len(values) - 1)))], 2),
            "cpu_p50_ms": round(statistics.median(statistics.median(v) for v in cpu.values()), 2),
            "questions": len(values)}


def profile_top(profile: Profile, asked: list[tuple[dict, dict]], top: int = 25) -> str:
    prof = cProfile.Profile()
    prof.enable()
    measure(profile, asked, 1)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def run(*, data: dict, sizes: list[int], n_questions: int = 200, rounds: int = 3, profile_at_end: bool = False) -> dict:
    user = get_user_model().objects.create(username=f"repeat{time.time_ns()}")
    profile = Profile.objects.create(user=user, key=f"repeat{time.time_ns()}")
    source = lines(data)
    asked = queries(data, n_questions)
    base = sum(len(c["docs"]) for c in data["conversations"])
    out = {"distinct_lines": base, "sizes": {}}
    have, vector_of = 0, {}
    for size in sorted(sizes):
        seconds = grow(profile, data, source, have, size, vector_of)
        have = size
        measure(profile, asked[:20], 1)  # warm the caches a running server has warm
        row = measure(profile, asked, rounds)
        row.update(seed_seconds=round(seconds, 1), recurrence=round(size / base, 1))
        out["sizes"][str(size)] = row
        print(f"[recall_repeat] {size:,} lines: p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, "
              f"CPU p50 {row['cpu_p50_ms']} ms "
              f"(load {load_average()})", flush=True)
    if profile_at_end:
        out["profile"] = profile_top(profile, asked)
    sizes_done = out["sizes"]
    if "10000" in sizes_done and "100000" in sizes_done:
        out["ratio_100k_10k"] = round(sizes_done["100000"]["p50_ms"] / sizes_done["10000"]["p50_ms"], 3)
    return out


def remeasure(data: dict, *, n_questions: int, rounds: int, profile_at_end: bool) -> str:
    """Measure (and profile) the newest archive of a kept database again (after a change)."""
    profile = Profile.objects.filter(key__startswith="repeat").order_by("-pk").first()
    asked = queries(data, n_questions)
    measure(profile, asked[:20], 1)
    row = measure(profile, asked, rounds)
    lines_ = Message.objects.filter(profile=profile).count()
    out = (f"{lines_:,} lines: p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, CPU p50 {row['cpu_p50_ms']} ms "
           f"(load {os.getloadavg()[0]:.2f})")
    return out + ("\n" + profile_top(profile, asked) if profile_at_end else "")


def summary(data: dict) -> str:
    lines_ = [
        "### Recall on an archive that repeats itself (BENCH §2, issue 24 point 10)",
        "",
        f"LoCoMo's {data['distinct_lines']:,} turns repeated with a short suffix; LoCoMo's questions ranked by "
        "the chat's recall (hybrid as shipped) through retrieve_batch's `rank_queries`; per-question medians.",
        "",
        "| archived lines | each line recurs | p50 ms | p99 ms | CPU p50 ms | questions | loading s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, row in data["sizes"].items():
        lines_.append(f"| {int(size):,} | ×{row['recurrence']} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} "
                      f"| {row.get('cpu_p50_ms', float('nan')):.2f} "
                      f"| {row['questions']} | {row['seed_seconds']} |")
    if "ratio_100k_10k" in data:
        p50 = data["sizes"]["100000"]["p50_ms"]
        ok = data["ratio_100k_10k"] <= 1.5 and p50 <= 15
        lines_ += ["", f"p50 ratio 100k/10k: **{data['ratio_100k_10k']:.2f}** (goal ≤ 1.5); p50 at 100k "
                   f"**{p50:.2f} ms** (goal ≤ 15 ms): {'met' if ok else 'NOT met'}."]
    return "\n".join(lines_)
