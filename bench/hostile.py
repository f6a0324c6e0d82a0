"""Issue 24's hostile cases in `make bench` (points 1–5, 7–9): `make hostile`'s suite runs in a
child process against a real `previously.server` on loopback, and each figure it prints
(`[hostile] …`: memory, CPU, lock time, another person's latency, each beside its goal) goes
into SUMMARY.md as it was printed.

    python -m bench.hostile
"""

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from bench.machine import load_average

ROOT = Path(__file__).resolve().parent.parent
MARK = "[hostile]"


def suite_env(started: Mapping[str, str]) -> dict[str, str]:
    """The environment the suite runs in, as `make hostile` runs it: the one `make bench` was
    started in (`started`), not the one it set for its own sections. With their DJANGO_DEBUG=0
    and no https switches, the suite's servers answered every request with a redirect to https
    and 23 of the 24 cases failed. Without a DATABASE_URL (the tests make their own), and with the
    figures on (PREVIOUSLY_HOSTILE_FIGURES=1: the servers' production settings)."""
    env = {k: v for k, v in started.items() if k != "DATABASE_URL"}
    return env | {"PREVIOUSLY_HOSTILE_FIGURES": "1"}


def run(started: Mapping[str, str] | None = None) -> dict:
    """Run tests/hostile once in `suite_env(started)` (this process's environment when None);
    the figures it printed, its outcome line and exit code."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:randomly", "tests/hostile"],
        cwd=ROOT, env=suite_env(os.environ if started is None else started), capture_output=True, text=True,
        check=False,
    )
    lines = done.stdout.splitlines()
    figures = [line.split(MARK, 1)[1].strip() for line in lines if MARK in line]
    outcome = next((line.strip("= ") for line in reversed(lines) if " passed" in line or " failed" in line), "")
    return {"figures": figures, "outcome": outcome, "exit_code": done.returncode, "load": load_average()}


def summary(result: dict) -> str:
    rows = "\n".join(f"- {figure}" for figure in result["figures"]) or "- (no figures printed)"
    verdict = "all held" if result["exit_code"] == 0 else f"**not all held** (exit code {result['exit_code']})"
    return (
        "### Hostile input at real sizes (issue 24 points 1–5, 7–9; `make hostile`)\n\n"
        "Each line as the suite printed it, with its goal; the suite's assertions are the goals "
        "that have no number.\n\n"
        f"{rows}\n\n{result['outcome']}: {verdict}. Load average at the end: {result['load']} "
        f"on {os.cpu_count()} CPUs."
    )


if __name__ == "__main__":
    found = run()
    print(summary(found))
    sys.exit(found["exit_code"])
