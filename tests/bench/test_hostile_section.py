"""`make bench` carries `make hostile`'s figures (issue 24: "make bench prints points 1–6, 10
and 11 with their goals"): the summary keeps every printed figure and says when a case failed."""

from bench.hostile import suite_env, summary


def test_the_summary_keeps_each_figure_and_says_when_the_suite_failed():
    held = {"figures": ["GIF bomb …: server CPU 0.07 s (goal ≤ 1 s)"], "outcome": "24 passed in 147.13s",
            "exit_code": 0, "load": "0.99 / 0.60 / 0.36"}
    text = summary(held)
    assert "- GIF bomb …: server CPU 0.07 s (goal ≤ 1 s)" in text and "all held" in text
    failed = summary(held | {"exit_code": 1, "outcome": "1 failed, 23 passed"})
    assert "**not all held** (exit code 1)" in failed and "1 failed, 23 passed" in failed


def test_the_suite_runs_as_make_hostile_runs_it_not_in_the_benchs_own_environment():
    """`make bench` sets DJANGO_DEBUG=0 and a scratch DATABASE_URL for its own sections; handed
    on, the suite's servers redirected every request to https and 23 of the 24 cases failed."""
    started = {"PATH": "/usr/bin", "DATABASE_URL": "postgres://elsewhere/x", "LANG": "C.UTF-8"}
    env = suite_env(started)
    assert env == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "PREVIOUSLY_HOSTILE_FIGURES": "1"}
    assert "DATABASE_URL" in started  # the bench's own environment is left as it is
