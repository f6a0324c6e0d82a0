"""`make loadtest` keeps working (BENCH §4): a small run of its one-process scenario — real
Daphne, real websockets, the model server in its own process — loses, doubles and fails nothing."""

from bench.loadtest import Pace, scenario, summary


def test_a_small_paced_run_of_the_load_script_loses_and_doubles_nothing():
    row = scenario("one-process", n=4, turns=2, processes=1, pace=Pace(ramp=0.5, think_min=0.1, think_max=0.3))
    assert (row["sent"], row["turns_measured"], row["replies_archived"]) == (8, 8, 8)
    assert (row["lost"], row["duplicated"], row["errors"]) == (0, 0, 0), row["error_samples"]
    assert row["added_first_token_ms_p50"] is not None and len(row["samples"]) == 8


def test_make_bench_prints_the_last_load_test_with_its_goal():
    """Issue 24 point 11: `make bench` shows BENCH §4 from the last `make loadtest`, each
    scenario with its load average and whether the goal (p99 ≤ 100 ms, nothing lost) is met."""
    row = {"scenario": "one-process", "n": 200, "turns_each": 3, "added_first_token_ms_p50": 30.0,
           "added_first_token_ms_p99": 90.0, "added_first_token_ms_max": 120.0, "lost": 0, "duplicated": 0,
           "errors": 0, "load_before": "0.50 / 0.40 / 0.30", "load_after": "1.00 / 0.50 / 0.30"}
    text = summary([row, {**row, "scenario": "one-process+evolution", "added_first_token_ms_p99": 180.0}])
    assert "p99 ≤ 100 ms" in text and "0.50 / 0.40 / 0.30" in text
    assert text.count("| met |") == 1 and text.count("NOT met") == 1
    assert "run `make loadtest`" in summary([])
