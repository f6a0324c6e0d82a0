"""A real server for the hostile-input suite (issue 16 point 7): `previously.server` (Daphne
with bounded bodies) in its own process on a free loopback port, on a scratch SQLite database,
with helpers to measure its memory and how long other requests take while it is attacked."""

import asyncio
import json
import os
import socket
import statistics
import threading
import time
import uuid
from pathlib import Path

import websockets

from bench.stack import Stack

REQUEST_TIMEOUT = 30
# `make hostile` prints the figures with production's password hash; `make test` runs the same
# cases on tests/hostile/settings.py, whose quick hash spares the suite the sign-ins' CPU.
FIGURES = os.environ.get("PREVIOUSLY_HOSTILE_FIGURES") == "1"


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def tree_rss_bytes(pid: int) -> int:
    """The resident memory of `pid` and every process below it (the server and the children it
    starts for heavy work, previously/child.py), added up; a process gone meanwhile counts 0."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0, [pid]
    while todo:
        one = todo.pop()
        todo.extend(children.get(one, ()))
        try:
            total += rss_bytes(one)
        except (OSError, RuntimeError):
            pass
    return total


def start(tmp_path, env: dict | None = None) -> Stack:
    quick = {} if FIGURES else {"DJANGO_SETTINGS_MODULE": "tests.hostile.settings"}
    return Stack(processes=1, database_url="", redis_url="", var_dir=str(tmp_path / "var"),
                 env={"PREVIOUSLY_PROACTIVE_CHECK_SECONDS": "0", **quick, **(env or {})}).start()


def get(port: int, path: str, cookie: str = "") -> tuple[int, float]:
    """One GET on a fresh connection (with this Cookie header, if any): (status, seconds)."""
    started = time.monotonic()
    extra = f"Cookie: {cookie}\r\n" if cookie else ""
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n\r\n".encode())
        head = s.recv(64)
        while s.recv(65536):
            pass
    return int(head.split()[1]), time.monotonic() - started


def send_body(port: int, path: str, headers: dict[str, str], chunks, *, chunked: bool = False) -> int | None:
    """POST a body chunk by chunk as fast as the server takes it; the status the server answered
    with (None if it closed without one). The sender stops when the server closes on it."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        try:
            for chunk in chunks:
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            if chunked:
                s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            head = s.recv(64)
        except ConnectionResetError:
            return None
    return int(head.split()[1]) if head.startswith(b"HTTP/") else None


class Probe:
    """GETs `path` every `every` seconds on another connection while an attack runs; the
    latencies say whether other requests kept answering."""

    def __init__(self, port: int, pid: int, path: str = "/login/", every: float = 0.05, cookie: str = ""):
        self.port, self.pid, self.path, self.every, self.cookie = port, pid, path, every, cookie
        self.peak_rss = rss_bytes(pid)
        self.peak_tree_rss = tree_rss_bytes(pid)  # with the server's children (heavy work)
        self.latencies: list[float] = []
        self.started: list[float] = []  # time.monotonic() when each probe began
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            began = time.monotonic()
            status, seconds = get(self.port, self.path, self.cookie)
            self.statuses.append(status)
            self.started.append(began)
            self.latencies.append(seconds)
            self.peak_rss = max(self.peak_rss, rss_bytes(self.pid))
            self.peak_tree_rss = max(self.peak_tree_rss, tree_rss_bytes(self.pid))
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=REQUEST_TIMEOUT + 5)

    def summary(self) -> str:
        if not self.latencies:
            return "no probe answered"
        ms = sorted(s * 1000 for s in self.latencies)
        return (f"{len(ms)} probes, median {statistics.median(ms):.1f} ms, "
                f"p99 {self.p99() * 1000:.1f} ms, max {ms[-1]:.1f} ms")

    def p99(self, since: float = 0.0, until: float = float("inf")) -> float:
        """The 99th percentile of the probes' latencies, in seconds (the slowest when few); of
        those begun between `since` and `until` (time.monotonic()) when given."""
        ms = sorted(s for s, began in zip(self.latencies, self.started, strict=True) if since <= began < until)
        return ms[min(len(ms) - 1, int(len(ms) * 0.99))] if ms else 0.0


class SocketProbe(Probe):
    """Another person's chat over the socket while an attack runs: a line sent every `every`
    seconds and timed until its reply is complete (with no model configured, the offline reply:
    the line archived, recall, the reply archived — a whole turn's database work)."""

    def __init__(self, port: int, pid: int, cookie: str, profile: str = "owner", every: float = 0.5):
        super().__init__(port, pid, path=f"/ws/chat/{profile}/", every=every, cookie=cookie)
        self.failures: list[str] = []

    def _run(self):
        asyncio.run(self._chat())

    async def _chat(self):
        url, origin = f"ws://127.0.0.1:{self.port}{self.path}", f"http://127.0.0.1:{self.port}"
        async with websockets.connect(url, additional_headers={"Cookie": self.cookie, "Origin": origin},
                                      open_timeout=REQUEST_TIMEOUT, max_size=None) as ws:
            n = 0
            while not self._stop.is_set():
                n += 1
                mid = "c_" + uuid.uuid4().hex[:16]
                started = time.monotonic()
                await ws.send(json.dumps({"action": "send", "mid": mid, "text": f"还在吗 probe {n} 🙂", "tz": "UTC"}))
                try:
                    async with asyncio.timeout(REQUEST_TIMEOUT):
                        while f"outerHTML:#reply-{mid}" not in await ws.recv():
                            pass
                except TimeoutError:
                    self.failures.append(f"line {n}: no reply in {REQUEST_TIMEOUT} s")
                    continue
                self.latencies.append(time.monotonic() - started)
                self.started.append(started)
                self.statuses.append(200)
                self.peak_rss = max(self.peak_rss, rss_bytes(self.pid))
                await asyncio.to_thread(self._stop.wait, self.every)

    def summary(self) -> str:
        said = super().summary()
        return said + (f"; {len(self.failures)} failed ({self.failures[0]})" if self.failures else "")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
