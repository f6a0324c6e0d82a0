"""BENCH.md §1: LoCoMo evidence recall for the production recall, the legacy algorithm and BM25.

The production rows go through `manage.py retrieve_batch` on an INPUT file generated
here from locomo10.json (protocol `locomo-recall-v1`), exactly as an outside harness
would run it: in a separate process per engine (the scratch SQLite file, and PostgreSQL
at $BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/previously_bench,
created and migrated when missing; skipped when unreachable) and per mode (hybrid, the
default, and PREVIOUSLY_EMBEDDINGS=off). The legacy and BM25 rows are pure Python over the
same documents.
"""

import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

from memory.recall.tokenize import ENGLISH_STOP_WORDS, tokenize_r1

REPO = Path(__file__).resolve().parent.parent
_RELATIVE = Path("shared") / "data" / "locomo" / "locomo10.json"


def _data_path() -> Path:
    """$LOCOMO_PATH, else ../shared/data/locomo/locomo10.json beside the repo (or a worktree's parents)."""
    if os.environ.get("LOCOMO_PATH"):
        return Path(os.environ["LOCOMO_PATH"])
    for parent in REPO.parents:
        if (parent / _RELATIVE).exists():
            return parent / _RELATIVE
    return REPO.parent / _RELATIVE


DATA = _data_path()
KS = (5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def normalise_evidence(raw: list) -> list[str]:
    """'D8:6; D9:17' and 'D9:1 D4:4' split, 'D:11:26' repaired, 'D' dropped, de-duplicated."""
    out = []
    for entry in raw:
        for part in re.split(r"[;,\s]+", str(entry)):
            m = _EVIDENCE.fullmatch(part)
            if m:
                out.append(f"D{int(m[1])}:{int(m[2])}")
    return list(dict.fromkeys(out))


def build_input(path: Path = DATA) -> tuple[dict, dict]:
    """(the protocol INPUT, {qid: (category, evidence)}) for the 1,536 scored questions."""
    conversations, gold = [], {}
    for sample in json.loads(path.read_text(encoding="utf-8")):
        c = sample["conversation"]
        docs = []
        sessions = sorted(int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k))
        for n in sessions:
            when = c[f"session_{n}_date_time"]
            ts = datetime.strptime(when.strip(), "%I:%M %p on %d %B, %Y").strftime("%Y-%m-%dT%H:%M")
            for turn in c[f"session_{n}"]:
                doc = {"id": turn["dia_id"], "text": f"{turn['speaker']}: {turn['text']}",
                       "speaker": turn["speaker"], "timestamp": ts, "date_time": when,
                       "session": n, "order": len(docs)}
                if turn.get("blip_caption"):
                    doc["image_caption"] = turn["blip_caption"]
                docs.append(doc)
        queries = []
        for i, qa in enumerate(sample["qa"]):
            evidence = normalise_evidence(qa.get("evidence", []))
            if qa["category"] == 5 or not evidence:
                continue
            qid = f"{sample['sample_id']}:{i}"
            queries.append({"qid": qid, "question": qa["question"]})
            gold[qid] = (qa["category"], evidence)
        conversations.append({"id": sample["sample_id"], "speaker_a": c["speaker_a"],
                              "speaker_b": c["speaker_b"], "docs": docs, "queries": queries})
    return {"format": "locomo-recall-v1", "conversations": conversations}, gold


def score(rankings: dict[str, list[str]], gold: dict) -> dict:
    """recall@k overall and per category: the share of evidence turns in the top k, averaged."""
    per = defaultdict(lambda: defaultdict(list))
    for qid, (category, evidence) in gold.items():
        ranked = rankings.get(qid, [])
        for k in KS:
            top = set(ranked[:k])
            value = sum(e in top for e in evidence) / len(evidence)
            per["overall"][k].append(value)
            per[CATEGORIES[category]][k].append(value)
    return {group: {f"R@{k}": round(sum(v) / len(v), 4) for k, v in ks.items()} for group, ks in per.items()}


def rank_legacy(data: dict, window: int = 300) -> dict[str, list[str]]:
    """The old system: the newest 300 turns, R1 tokens, count of distinct query tokens found
    as substrings, ties newest first, turns with no hit left out."""
    out = {}
    for conv in data["conversations"]:
        pool = [(d["order"], d["id"], d["text"].lower()) for d in conv["docs"][-window:]]
        for q in conv["queries"]:
            terms = set(tokenize_r1(q["question"]))
            scored = sorted((-sum(t in text for t in terms), -order, i) for order, i, text in pool)
            out[q["qid"]] = [i for hits, _, i in scored if hits < 0]
    return out


def _bm25_tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"\w+", text.lower()) if t not in ENGLISH_STOP_WORDS]


def rank_bm25(data: dict, k1: float = 1.2, b: float = 0.75) -> dict[str, list[str]]:
    """Okapi BM25 (Lucene idf, NLTK stop words) over every turn: BENCH §1's reference row."""
    out = {}
    for conv in data["conversations"]:
        docs = [Counter(_bm25_tokens(d["text"])) for d in conv["docs"]]
        lengths = [sum(d.values()) for d in docs]
        avg = sum(lengths) / len(lengths)
        df = Counter(t for d in docs for t in d)
        n = len(docs)
        for q in conv["queries"]:
            terms = set(_bm25_tokens(q["question"]))
            idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
            scored = []
            for i, d in enumerate(docs):
                s = sum(idf[t] * d[t] * (k1 + 1) / (d[t] + k1 * (1 - b + b * lengths[i] / avg))
                        for t in terms if t in d)
                scored.append((-s, i))
            scored.sort()
            out[q["qid"]] = [conv["docs"][i]["id"] for _, i in scored]
    return out


POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/previously_bench")
MODES = {"hybrid": "local", "lexical": "off"}


def retrieve(input_path: Path, output_path: Path, *, database_url: str, embeddings: str, k: int) -> dict:
    """`manage.py retrieve_batch` in its own process on one engine and mode: (output, seconds)."""
    env = {**os.environ, "DATABASE_URL": database_url, "PREVIOUSLY_EMBEDDINGS": embeddings, "DJANGO_DEBUG": "0"}
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "retrieve_batch", str(input_path), str(output_path), "--k", str(k)],
        check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
    )
    output = json.loads(output_path.read_text(encoding="utf-8"))
    output["seconds"] = round(time.perf_counter() - began, 1)
    return output


def postgres_ready(url: str | None = None) -> bool:
    """Create and migrate the bench database when PostgreSQL answers; False when it does not."""
    url = url or POSTGRES_URL
    env = {**os.environ, "DATABASE_URL": url}
    base, _, name = url.rpartition("/")
    created = subprocess.run(
        ["psql", f"{base}/postgres", "-qtAc", f'CREATE DATABASE "{name}"'], capture_output=True, text=True
    )
    if created.returncode != 0 and "already exists" not in created.stderr:
        return False
    done = subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "--noinput", "-v", "0"],
                          env=env, cwd=REPO, capture_output=True, text=True)
    return done.returncode == 0


def migrate(url: str) -> None:
    subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "--noinput", "-v", "0"],
                   env={**os.environ, "DATABASE_URL": url}, cwd=REPO, check=True)


def run(*, workdir: Path, k: int = 20, engines: tuple[str, ...] = ("sqlite", "postgresql")) -> dict:
    data, gold = build_input()
    input_path = workdir / "locomo-input.json"
    input_path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    urls = {"sqlite": f"sqlite:///{workdir / 'locomo.sqlite3'}", "postgresql": POSTGRES_URL}
    if "sqlite" in engines:
        migrate(urls["sqlite"])
    rows, timing = {}, {}
    for engine in engines:
        if engine == "postgresql" and not postgres_ready(urls[engine]):
            continue
        for mode, setting in MODES.items():
            output = retrieve(input_path, workdir / f"locomo-{engine}-{mode}.json",
                              database_url=urls[engine], embeddings=setting, k=k)
            latencies = sorted(output["latency_ms"].values())
            name = f"production {mode}, {engine}"
            rows[name] = score(output["results"], gold)
            timing[name] = {
                "retrieve_batch_seconds": output["seconds"],
                "p50": round(statistics.median(latencies), 3),
                "p99": round(latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))], 3),
            }
    rows["legacy (hit count, newest 300)"] = score(rank_legacy(data), gold)
    rows["BM25 (k1 1.2, b 0.75, NLTK stop words)"] = score(rank_bm25(data), gold)
    return {
        "data": str(DATA),
        "conversations": len(data["conversations"]),
        "docs": sum(len(c["docs"]) for c in data["conversations"]),
        "questions": len(gold),
        "timing": timing,
        "rows": rows,
    }


def summary(data: dict) -> str:
    cats = list(CATEGORIES.values())
    lines = [
        "### LoCoMo evidence recall (BENCH §1)",
        "",
        f"{data['questions']} questions over {data['docs']} turns in {data['conversations']} conversations "
        f"({data['data']}). Production = `manage.py retrieve_batch` (archive_message → rank_messages) "
        "in its own process per engine and mode; hybrid = the default in-process embeddings fused with "
        "the lexical ranking, lexical = PREVIOUSLY_EMBEDDINGS=off.",
        "",
        *[f"- {name}: {t['retrieve_batch_seconds']} s with loading; recall p50 {t['p50']} ms / p99 {t['p99']} ms"
          for name, t in data["timing"].items()],
        "",
        "| retriever | R@5 | R@10 | R@20 | " + " | ".join(f"{c} R@5/10/20" for c in cats) + " |",
        "| --- | ---: | ---: | ---: | " + " | ".join("---" for _ in cats) + " |",
    ]
    for name, row in data["rows"].items():
        o = row["overall"]
        cells = [f"{o['R@5']:.3f}", f"{o['R@10']:.3f}", f"{o['R@20']:.3f}"]
        cells += ["/".join(f"{row[c][f'R@{k}']:.3f}" for k in KS) for c in cats]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Bars: hybrid R@5 ≥ 0.70, R@10 ≥ 0.80; lexical R@5 ≥ 0.60, R@10 ≥ 0.70; every category "
              "≥ BM25; R@10 of the two engines within 0.01 of each other."]
    return "\n".join(lines)
