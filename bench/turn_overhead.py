"""BENCH.md §2: the time the app adds to a chat turn before the model is called, by archive size.

A production turn is exactly the chat's work before the model call: archive the user
message (archive_message, with its index write), then `previously.chat.turn.prepare`:
recall over the whole archive (rank_messages + highlights/experiences + token budget),
the frozen card (K9), the arrival briefing (K14) and the prompt in SPEC R5's order.
The legacy algorithm's turn is measured in the same run on the same archive: the same
archive write, then the old recall (the newest 300 messages, count of R1 tokens found as
substrings) and a plain prompt of the recalled lines.

The archive is mixed Chinese/English: LoCoMo's English turns and recombined Chinese
phrases with fresh bigrams, so the vocabulary keeps growing as in real chat.
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
from memory.recall import embedding, vectors
from memory.recall.index import index_messages, optimize_index
from memory.recall.tokenize import tokenize_r1

ZH_PHRASES = (
    "我上周去了杭州出差 西湖边上的酒店很安静 下周三要交季度报告 我的猫咪最近不爱吃饭 医生说没什么大问题 "
    "周末想去爬山 天气预报说会下雨 妈妈做的红烧肉最好吃 我在学弹吉他 手指还是很疼 公司新来的同事很友好 "
    "昨天加班到很晚 地铁上人太多了 我打算明年去日本旅行 最近在看一本科幻小说 晚饭吃了饺子 妹妹下个月结婚 "
    "婚礼在海边举行 我买了一辆新自行车 每天骑车上班 咖啡喝多了睡不着 朋友推荐了一部电影 电影结局很感人 "
    "今天心情不太好 工作压力很大 想换一份工作 面试的时候很紧张 终于拿到了录用通知 搬家真的好累 新家离公司很近 "
    "楼下有一家面包店 早上的面包很香 小时候住在外婆家 外婆种了很多花 春节回老家过年 爸爸的生日快到了 "
    "给他买了一块手表 最近开始跑步 跑了五公里 膝盖有点疼 周末参加了一个读书会 大家讨论得很热烈"
).split()
CHARS = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定"
    "行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其"
)
ZH_QUESTIONS = [
    "我什么时候去杭州出差？", "猫咪怎么了？", "妹妹什么时候结婚？", "我在学什么乐器？", "明年打算去哪里旅行？",
    "外婆种了什么？", "给爸爸买了什么生日礼物？", "跑步跑了多远？", "新家离哪里近？", "读书会讨论了什么？",
]
LEGACY_WINDOW = 300
RECALL_LIMIT = 20
PROMPT_MESSAGES = 10
PROMPT_BUDGET_CHARS = 6000  # stand-in for SPEC R4's token budget


class Synthetic:
    """Mixed Chinese/English lines and questions, reproducible from a seed."""

    def __init__(self, english: list[str], questions: list[str], seed: int = 7):
        self.rng = random.Random(seed)
        self.english, self.questions = english, questions

    def line(self) -> str:
        r = self.rng
        if r.random() < 0.5:
            return r.choice(self.english)
        parts = [r.choice(ZH_PHRASES) for _ in range(r.randint(1, 3))]
        if r.random() < 0.5:  # fresh bigrams, so the vocabulary keeps growing
            parts.append("".join(r.choice(CHARS) for _ in range(r.randint(2, 6))))
        if r.random() < 0.2:  # code-switching
            parts.append(r.choice(self.english).split(".")[0][:40])
        return "，".join(parts) + r.choice(["。", "！", "？", " 😀"])

    def question(self) -> str:
        return self.rng.choice(ZH_QUESTIONS) if self.rng.random() < 0.5 else self.rng.choice(self.questions)


def seed_archive(profile: Profile, offset: int, n: int, gen: Synthetic) -> float:
    """Bulk-load n lines (50 per closed slice) and index them in batches, as an import would."""
    began = time.perf_counter()
    start = timezone.now() - timezone.timedelta(days=800)
    for first in range(0, n, 5000):
        slices, rows = {}, []
        for i in range(offset + first, offset + min(n, first + 5000)):
            at = start + timezone.timedelta(minutes=5 * i)
            if i // 50 not in slices:
                slices[i // 50] = Slice(profile=profile, key=at.strftime("%Y-%m-%d-%H%M"), started_at=at,
                                        last_message_at=at, ended_at=at, close_reason="import")
            rows.append((i // 50, at, i))
        with transaction.atomic():
            Slice.objects.bulk_create(slices.values())
            msgs = Message.objects.bulk_create(
                [Message(profile=profile, slice=slices[s], mid=f"s_{i:016x}", created_at=at, content=gen.line(),
                         speaker="user" if i % 2 else "assistant", local_day_key=at.date().isoformat())
                 for s, at, i in rows],
                batch_size=1000,
            )
            index_messages(msgs, new=True)
            vectors.embed_and_store(msgs)  # what `manage.py embed_backfill` adds (none when off)
    optimize_index()  # what an import does after a bulk load
    return time.perf_counter() - began


def legacy_recall(profile: Profile, question: str) -> list[int]:
    """The old system: newest 300 lines, score = distinct R1 query tokens found as substrings."""
    terms = set(tokenize_r1(question))
    pool = Message.objects.filter(profile=profile, deleted_at__isnull=True).order_by("-created_at", "-id")
    scored = []
    for age, (pk, content) in enumerate(pool.values_list("id", "content")[:LEGACY_WINDOW]):
        text = content.lower()
        hits = sum(1 for t in terms if t in text)
        if hits:
            scored.append((-hits, age, pk))
    scored.sort()
    return [pk for _, _, pk in scored[:RECALL_LIMIT]]


def prompt_stand_in(ids: list[int]) -> str:
    """Load the recalled lines and format them within a budget (until the chat's prompt module lands)."""
    rows = Message.objects.in_bulk(ids[:PROMPT_MESSAGES])
    out, used = [], 0
    for pk in ids[:PROMPT_MESSAGES]:
        m = rows.get(pk)
        if m is None:
            continue
        line = f"<<<[{m.speaker} {m.created_at:%Y-%m-%d %H:%M}] {m.content}>>>"
        if used + len(line) > PROMPT_BUDGET_CHARS:
            break
        out.append(line)
        used += len(line)
    return "\n".join(out)


def production_turn(profile: Profile, question: str, mid: str) -> None:
    """The chat's own work before the model is called (previously.chat.turn)."""
    from previously.chat.turn import prepare

    message = archive_message(profile=profile, mid=mid, speaker="user", content=question).message
    prepare(profile, message)


def legacy_turn(profile: Profile, question: str, mid: str) -> None:
    """The old order of work: archive, newest-300 recall, a plain prompt of the recalled lines."""
    archive_message(profile=profile, mid=mid, speaker="user", content=question)
    prompt_stand_in(legacy_recall(profile, question))


def _reply(profile: Profile, n: int, gen) -> None:
    """The companion's answer, archived after the timed part (it comes after the model call), so
    the conversation alternates speakers as a real one does."""
    archive_message(profile=profile, mid=f"a_{1_700_000_000_000 + n}_bench", speaker="assistant",
                    content=gen.question())


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run(*, sizes: list[int], turns: int, rounds: int, english: list[str], questions: list[str]) -> dict:
    gen = Synthetic(english, questions)
    user = get_user_model().objects.create(username=f"bench{time.time_ns()}")
    profile = Profile.objects.create(user=user, key="bench")
    algorithms = {"production": production_turn, "legacy": legacy_turn}
    out = {
        "turn": "archive_message (+ index) → previously.chat.turn.prepare (recall, card, briefing, prompt)",
        "rounds": rounds, "turns_per_round": turns, "sizes": {},
        "embeddings": embedding.kind(),  # the environment's, else the connections page's, else local
    }
    seeded, counter = 0, 0
    for size in sorted(sizes):
        seed_s = seed_archive(profile, seeded, size - seeded, gen)
        seeded = size
        row = {"seed_seconds": round(seed_s, 1)}
        for name, turn in algorithms.items():
            queries = []
            for _ in range(3):  # counted apart from the timed turns (counting forces query logging)
                counter += 1
                with CaptureQueriesContext(connection) as ctx:
                    turn(profile, gen.question(), f"c_{counter:016x}")
                queries.append(len(ctx.captured_queries))
                _reply(profile, counter, gen)
            row[name] = {"queries_per_turn": sorted(set(queries)), "p50_per_round": [], "p99_per_round": []}
        for _ in range(rounds):
            for name, turn in algorithms.items():
                timings = []
                for _ in range(turns):
                    counter += 1
                    question = gen.question()
                    began = time.perf_counter()
                    turn(profile, question, f"c_{counter:016x}")
                    timings.append((time.perf_counter() - began) * 1000)
                    _reply(profile, counter, gen)
                row[name]["p50_per_round"].append(round(statistics.median(timings), 3))
                row[name]["p99_per_round"].append(round(_percentile(timings, 99), 3))
        for name in algorithms:
            row[name]["p50_ms"] = statistics.median(row[name]["p50_per_round"])
            row[name]["p99_ms"] = statistics.median(row[name]["p99_per_round"])
        out["sizes"][str(size)] = row
    if "10000" in out["sizes"] and "100000" in out["sizes"]:
        p50 = {s: out["sizes"][s]["production"]["p50_ms"] for s in ("10000", "100000")}
        out["production_p50_ratio_100k_10k"] = round(p50["100000"] / p50["10000"], 3)
    return out


def summary(data: dict) -> str:
    lines = [
        "### Per-turn overhead (SQLite, BENCH §2; embeddings: " + data.get("embeddings", "local") + ")",
        "",
        f"A turn: {data['turn']}. Medians over {data['rounds']} rounds of {data['turns_per_round']} turns.",
        "Legacy: same archive write, then the newest-300 hit-count recall and a plain prompt of its lines.",
        "",
        "| archived messages | production p50 ms | production p99 ms | legacy p50 ms | legacy p99 ms "
        "| queries/turn production | queries/turn legacy | seeding s |",
        "| ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for size, row in data["sizes"].items():
        p, g = row["production"], row["legacy"]
        lines.append(
            f"| {int(size):,} | {p['p50_ms']:.2f} | {p['p99_ms']:.2f} | {g['p50_ms']:.2f} | {g['p99_ms']:.2f} "
            f"| {p['queries_per_turn']} | {g['queries_per_turn']} | {row['seed_seconds']} |"
        )
    if "production_p50_ratio_100k_10k" in data:
        lines += ["", f"Production p50 ratio 100k/10k: **{data['production_p50_ratio_100k_10k']:.2f}** (bar ≤ 1.5); "
                  "bar at 100k: p50 ≤ 15 ms, p99 ≤ 60 ms."]
    return "\n".join(lines)


def plot(data: dict, path) -> bool:
    """Latency against archive size (PNG); False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = [int(s) for s in data["sizes"]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, style in (("production", "-o"), ("legacy", "--s")):
        for stat in ("p50_ms", "p99_ms"):
            ax.plot(sizes, [data["sizes"][str(s)][name][stat] for s in sizes], style,
                    label=f"{name} {stat[:3]}", alpha=1.0 if stat == "p50_ms" else 0.6)
    ax.axhline(15, color="grey", lw=0.8, ls=":", label="bar p50 15 ms")
    ax.axhline(60, color="grey", lw=0.8, ls="-.", label="bar p99 60 ms")
    ax.set_xscale("log")
    ax.set_xlabel("archived messages in the profile")
    ax.set_ylabel("per-turn overhead (ms)")
    ax.set_title("Per-turn overhead before the model call (SQLite)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
