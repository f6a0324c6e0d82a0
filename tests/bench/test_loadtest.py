"""`make loadtest` keeps working (BENCH §4): a small run of its one-process scenario — real
Daphne, real websockets, the model server in its own process — loses, doubles and fails nothing."""

from bench.loadtest import Pace, scenario


def test_a_small_paced_run_of_the_load_script_loses_and_doubles_nothing():
    row = scenario("one-process", n=4, turns=2, processes=1, pace=Pace(ramp=0.5, think_min=0.1, think_max=0.3))
    assert (row["sent"], row["turns_measured"], row["replies_archived"]) == (8, 8, 8)
    assert (row["lost"], row["duplicated"], row["errors"]) == (0, 0, 0), row["error_samples"]
    assert row["added_first_token_ms_p50"] is not None and len(row["samples"]) == 8
