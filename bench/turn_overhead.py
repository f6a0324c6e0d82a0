"""BENCH.md §2: the time the app adds to a chat turn before the model is called, by archive size.

Measured now: archive the user message (with its index write) and the full-text search
over the profile's whole archive. Later stages (recall assembly, prompt) join as they land.
"""

import random
import statistics
import time

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.archive import archive_message
from memory.models import Message, Profile, Slice
from memory.recall.index import index_messages, search
from memory.recall.tokenize import tokenize

ZH = "今天 我们 去 公园 散步 天气 很好 下周 要 交 报告 猫咪 生病 了 医生 说 没事 晚饭 吃 饺子 工作 压力 很大 想 旅行".split()
EN = "today we walked in the park weather was nice report due next week cat sick doctor said fine dinner dumplings work stress travel plans mountain".split()


def _line(rng: random.Random) -> str:
    words = [rng.choice(ZH if rng.random() < 0.5 else EN) for _ in range(rng.randint(4, 14))]
    return " ".join(words)


def _seed(profile: Profile, offset: int, n: int, rng: random.Random) -> None:
    """Bulk-load n archived lines (one slice per 50) and index them, as an import would."""
    start = timezone.now() - timezone.timedelta(days=400) + timezone.timedelta(minutes=offset)
    batch = 5000
    for first in range(0, n, batch):
        slices = {}
        rows = []
        for i in range(offset + first, offset + min(n, first + batch)):
            at = start + timezone.timedelta(minutes=i - offset)
            s_no = i // 50
            if s_no not in slices:
                slices[s_no] = Slice(
                    profile=profile, key=at.strftime("%Y-%m-%d-%H%M"), started_at=at, last_message_at=at,
                    ended_at=at, close_reason="import",
                )
            rows.append((s_no, at, i))
        with transaction.atomic():
            Slice.objects.bulk_create(slices.values())
            msgs = Message.objects.bulk_create(
                [
                    Message(profile=profile, slice=slices[s], mid=f"c_{i:016x}", speaker="user" if i % 2 else "assistant",
                            content=_line(rng), created_at=at)
                    for s, at, i in rows
                ],
                batch_size=1000,
            )
            index_messages(msgs)


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def run(*, sizes: list[int], turns: int) -> dict:
    rng = random.Random(7)
    user = get_user_model().objects.create(username=f"bench{time.time_ns()}")
    out = {"stages": ["archive_message (incl. index write)", "index search top 50"], "sizes": {}}
    seeded = 0
    profile = Profile.objects.create(user=user, key="bench")
    for size in sorted(sizes):
        _seed(profile, seeded, size - seeded, rng)
        seeded = size
        timings, queries = [], []
        for t in range(turns):
            text = _line(rng)
            with CaptureQueriesContext(connection) as ctx:
                began = time.perf_counter()
                archive_message(profile=profile, mid=f"c_{(1 << 60) + size * 10_000 + t:016x}", speaker="user", content=text)
                search(profile_id=profile.pk, tokens=tokenize(text), limit=50)
                timings.append((time.perf_counter() - began) * 1000)
            queries.append(len(ctx.captured_queries))
        out["sizes"][str(size)] = {
            "p50_ms": round(statistics.median(timings), 3),
            "p99_ms": round(_percentile(timings, 99), 3),
            "queries_per_turn": sorted(set(queries)),
        }
    return out


def summary(data: dict) -> str:
    lines = [
        "### Per-turn overhead (SQLite), stages: " + "; ".join(data["stages"]),
        "",
        "| archived messages | p50 ms | p99 ms | queries per turn |",
        "| ---: | ---: | ---: | --- |",
    ]
    for size, row in data["sizes"].items():
        lines.append(f"| {int(size):,} | {row['p50_ms']} | {row['p99_ms']} | {row['queries_per_turn']} |")
    return "\n".join(lines)
