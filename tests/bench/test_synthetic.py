"""bench.synthetic (BENCH §3, issue 25 points 3 and 8): the legacy dump the import benchmark
and the importer's tests use lives with the benchmarks, and is as varied as real data: line
lengths from a few characters to paragraphs, replies of several sentences, lines with no, one
or several mem: fragments, and never the same line twice."""

import importlib.util
import json

import pytest

from bench.synthetic import describe, write_dump


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "dump.json"
    write_dump(str(path), keys=8000, seed=2)
    return path


def test_the_generator_is_benchmark_code_outside_the_product():
    assert importlib.util.find_spec("memory.interop.synthetic") is None


def test_lines_vary_in_length_like_real_ones(dump):
    d = describe(str(dump))
    lines, replies = d["user_line_chars"], d["reply_chars"]
    assert lines["p10"] < 30 and lines["p90"] > 150 and lines["p99"] > 400, lines
    assert replies["p10"] < 40 and replies["p90"] > 100 and replies["mean"] > 60, replies


def test_lines_have_zero_one_or_several_fragments(dump):
    per_line = describe(str(dump))["fragments_per_msg_line"]
    assert set(per_line) == {"0", "1", "2", "3+"}, per_line
    assert per_line["1"] > 10 * (per_line["0"] + per_line["2"] + per_line["3+"])


def test_every_family_is_there_and_no_line_repeats(dump):
    d = describe(str(dump))
    assert set(d["families"]) == {"msg", "mem", "mem_", "hl", "exp", "rel", "tomb", "meta"}
    contents = [json.loads(item["value"])["content"] for item in json.loads(dump.read_text())
                if item["key"].startswith("msg:") and not item.get("base64")]
    assert len(set(contents)) == len(contents)
