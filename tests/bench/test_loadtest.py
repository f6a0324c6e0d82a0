"""`make loadtest` keeps working (BENCH §4): a small run of its one-process scenario — real
Daphne, real websockets, the model server in its own process — loses, doubles and fails nothing."""

import asyncio
import json

from bench.loadtest import ModelServer, Pace, scenario, summary


def test_a_small_paced_run_of_the_load_script_loses_and_doubles_nothing():
    row = scenario("one-process", n=4, turns=2, processes=1, pace=Pace(ramp=0.5, think_min=0.1, think_max=0.3))
    assert (row["sent"], row["turns_measured"], row["replies_archived"]) == (8, 8, 8)
    assert (row["lost"], row["duplicated"], row["errors"]) == (0, 0, 0), row["error_samples"]
    assert row["added_first_token_ms_p50"] is not None and len(row["samples"]) == 8
    # What the turns cost: the one server's CPU per turn, from /proc; no worker, no PostgreSQL.
    cpu = row["cpu_ms_per_turn"]
    assert cpu["servers"] > 0 and cpu["worker"] is None and cpu["postgresql"] is None
    # Where the time went: each step's own p50 / p99 from the server's log, the steps in order.
    assert list(row["steps_ms"]) == ["checked", "vector", "archived", "prepared", "echoed", "started", "model",
                                     "token", "total"]
    p50, p99 = row["steps_ms"]["model"]
    assert 50 <= p50 <= p99  # the model server's own first token is 50 ms


def test_the_model_server_keeps_its_connections_alive_as_real_ones_do():
    """llama.cpp, vLLM and Ollama answer request after request on one connection, a stream in
    chunked encoding; the load test's model server too, so a turn pays for no connection the
    real ones would not make it open."""
    model = ModelServer()

    async def two_streams() -> list[bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", model.port)
        body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "你好 🐱"}]}).encode()
        answers = []
        for _ in range(2):
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            head = await reader.readuntil(b"\r\n\r\n")
            assert b"Transfer-Encoding: chunked" in head and b"Connection: close" not in head
            answers.append(await reader.readuntil(b"\r\n0\r\n\r\n"))
        writer.close()
        return answers

    try:
        answers = asyncio.run(asyncio.wait_for(two_streams(), 10))
    finally:
        model.stop()
    assert all(b"word0 " in a and b"[DONE]" in a for a in answers)


def test_make_bench_prints_the_last_load_test_with_its_goal():
    """Issue 24 point 11: `make bench` shows BENCH §4 from the last `make loadtest`, each
    scenario with its load average, the machine's speed, what a turn cost each kind of process,
    and whether the goal (p99 ≤ 100 ms, nothing lost) is met."""
    row = {"scenario": "one-process", "n": 200, "turns_each": 3, "added_first_token_ms_p50": 30.0,
           "added_first_token_ms_p99": 90.0, "added_first_token_ms_max": 120.0, "lost": 0, "duplicated": 0,
           "errors": 0, "load_before": "0.50 / 0.40 / 0.30", "load_after": "1.00 / 0.50 / 0.30",
           "cpu_ms_per_turn": {"servers": 41.3, "worker": None, "postgresql": None}, "cpu_reference": 0.462}
    pg = {**row, "scenario": "two-processes+redis+pg", "cpu_ms_per_turn": {"servers": 50.0, "worker": 1.4, "postgresql": 19.5}}
    text = summary([row, {**row, "scenario": "one-process+evolution", "added_first_token_ms_p99": 180.0}, pg])
    assert "p99 ≤ 100 ms" in text and "0.50 / 0.40 / 0.30" in text
    assert "| 41.3 / – / – | 0.462 |" in text and "| 50.0 / 1.4 / 19.5 |" in text
    assert text.count("| met |") == 2 and text.count("NOT met") == 1
    older = {k: v for k, v in row.items() if k not in ("cpu_ms_per_turn", "cpu_reference")}
    assert "| ? | ? |" in summary([older])  # a result file from before these columns still prints
    assert "run `make loadtest`" in summary([])
    assert "Where a turn's time went" not in text  # no step timings in these rows
    timed = {**row, "steps_ms": {"checked": [6.4, 23.0], "model": [54.6, 68.5], "total": [87.4, 171.2]}}
    text = summary([timed, older])
    assert "| scenario | checked | model | total |" in text
    assert "| one-process | 6.4 / 23.0 | 54.6 / 68.5 | 87.4 / 171.2 |" in text
