"""Real local services for the fault and scale-out tests: free loopback ports, a
redis-server of the test's own, and a skip that is a failure where the services are required
(CI=true or PREVIOUSLY_REQUIRE_SERVICES=1: the CI machine has them)."""

import os
import shutil
import socket
import subprocess
import time

import pytest

REQUIRED = os.environ.get("CI", "").lower() == "true" or os.environ.get("PREVIOUSLY_REQUIRE_SERVICES") == "1"


def skip_or_fail(reason: str):
    """Skip cleanly on a developer's machine without the service; fail where it must be there."""
    if REQUIRED:
        pytest.fail(f"{reason} (required: CI=true or PREVIOUSLY_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, *, timeout: float = 20, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process on port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


class RedisServer:
    """A throwaway redis-server on a loopback port, stoppable and restartable on that port."""

    def __init__(self):
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            skip_or_fail("redis-server is not installed")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, proc=self.proc)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
