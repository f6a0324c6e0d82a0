"""The machine's load average and speed, printed beside every figure (the bench machine is shared)."""

import os
import resource
import time


def load_numbers() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded; empty where the system has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def load_average() -> str:
    """The load averages as text, "0.53 / 0.25 / 0.23" ("n/a" where the system has none)."""
    return " / ".join(f"{x:.2f}" for x in load_numbers()) or "n/a"


def cpu_reference() -> float:
    """Seconds this machine takes now for a fixed piece of pure Python (the best of three runs
    of `sum(i * i for i in range(5_000_000))`): how fast the interpreter runs, printed beside a
    latency so that runs on machines of different or changing speed can be read together.
    Seen on this workplace's 2-core machines: 0.20 s on one, 0.42-0.68 s within one hour on
    another."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        sum(i * i for i in range(5_000_000))
        best = min(best, time.perf_counter() - began)
    return round(best, 3)


def cpu_seconds(pid: int) -> float | None:
    """The CPU seconds (user + system) process `pid` has used so far, from /proc; None where it
    is gone or the system has no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb() -> float:
    """This process's own peak resident set, MB: the kernel's VmHWM, which starts afresh when the
    process's program starts. Not getrusage's ru_maxrss: a child that `subprocess` starts (vfork,
    then exec) inherits its parent's peak there, so a phase run after `make bench` had grown to
    850 MB read 800 MB itself (the child's own was a fraction). ru_maxrss only where there is no
    /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
