"""`python -m bench.locomo_sweep` (issue 18, BENCH §1): the tuning loop the fusion weights were
chosen with loads a LoCoMo-shaped file through the archive and ranks it under variants."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.locomo_sweep import parse_sets

REPO = Path(__file__).resolve().parents[2]
FIELDS = {"dense_weight": float, "n_dense": int}


def test_each_value_of_a_set_is_one_variant_of_its_field():
    assert parse_sets(["dense_weight=0.4, 0.8", "n_dense=100"], FIELDS) == [
        ("dense_weight", 0.4), ("dense_weight", 0.8), ("n_dense", 100)
    ]


@pytest.mark.parametrize(
    "pair, says",
    [("dense=0.4", "dense=0.4"), ("dense_weight", "FIELD=V1,V2"), ("n_dense=1.5", "'1.5' is not a int")],
)
def test_a_wrong_set_is_refused_naming_it(pair, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        parse_sets([pair], FIELDS)


def _sample() -> list[dict]:
    turns = [
        ("Lin", "D1:1", "Hi Sam! My cat Niangao was sick this morning, so we went to the vet."),
        ("Sam", "D1:2", "Oh no, I hope the little one feels better soon 🐱"),
        ("Lin", "D1:3", "周末我们去了西湖划船，天气特别好。"),
        ("Sam", "D1:4", "I started learning the cello last month and practise every evening."),
    ]
    return [{
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Lin", "speaker_b": "Sam", "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in turns],
        },
        "qa": [
            {"question": "Why did Lin go to the vet?", "evidence": ["D1:1"], "category": 4},
            {"question": "What instrument is Sam learning?", "evidence": ["D1:4"], "category": 4},
            {"question": "他们周末在西湖做了什么？", "evidence": ["D1:3"], "category": 4},
            {"question": "Anything adversarial?", "evidence": ["D1:2"], "category": 5},
        ],
    }]


def _sweep(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(_sample(), ensure_ascii=False), encoding="utf-8")
    env = {**os.environ, "PREVIOUSLY_EMBEDDINGS": "off"}
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "bench.locomo_sweep", "--data", str(data), "--db", str(tmp_path / "sweep.sqlite3"), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )


def test_a_sweep_loads_once_and_ranks_each_variant(tmp_path):
    first = _sweep(tmp_path, "--set", "n_candidates=1,50")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("configuration"))
    assert [line.split(" in ")[0] for line in lines[:header]] == ["tiny-1: 4 lines loaded"]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[header + 1 :]}
    # Three scored questions (category 5 is left out), each with distinctive words of its line.
    assert rows["default"] == ["1.0000", "1.0000", "1.0000"]
    assert rows["n_candidates=50"] == ["1.0000", "1.0000", "1.0000"]
    assert list(rows) == ["default", "n_candidates=1", "n_candidates=50"]

    again = _sweep(tmp_path)
    assert again.returncode == 0, again.stderr
    assert "lines loaded" not in again.stdout  # the same data, analyser and model: the load is reused


def test_an_unknown_field_stops_the_sweep_before_anything_loads(tmp_path):
    run = _sweep(tmp_path, "--set", "weight=1")
    assert run.returncode == 2
    assert "--set 'weight=1'" in run.stderr and not (tmp_path / "sweep.sqlite3").exists()
