"""The bench's own measures of the machine (bench/machine.py)."""

import subprocess
import sys

import pytest

from bench.machine import peak_rss_mb

CHILD = "from bench.machine import peak_rss_mb; print(peak_rss_mb())"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_a_child_phase_reports_its_own_peak_not_its_parents():
    """BENCH §3 and §5 run each phase in a child process and report its peak RSS. getrusage's
    ru_maxrss gave a child the peak of `make bench`'s own process (grown to 850 MB by the recall
    sections before), so a phase read 800 MB and its bar "NOT met"."""
    held = bytearray(300 * 1024 * 1024)
    held[::4096] = b"\x01" * len(held[::4096])  # touch every page: resident, not just reserved
    assert peak_rss_mb() >= 300
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    assert float(out.stdout) < 200, out.stdout
    del held
