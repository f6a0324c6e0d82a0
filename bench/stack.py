"""Start the scaled-out stack on loopback (O3): N Daphne processes, optionally a
django-tasks-db worker, on the database and channel layer the URLs name. Used by
`scripts/scale_out.sh` (via `python -m bench.stack`), the cross-process test and `make loadtest`.
Every process is a child of this one, on a free 127.0.0.1 port, and is stopped by stop()."""

import argparse
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
# A server with production settings over plain http (loopback has no TLS proxy): no per-query
# logging, and the session cookie still sent to http://127.0.0.1, so a socket can sign in.
PRODUCTION_OVER_HTTP = {"DJANGO_DEBUG": "0", "DJANGO_SECURE_SSL_REDIRECT": "0", "DJANGO_SECURE_COOKIES": "0"}
# Migrated empty SQLite databases, one per state of the migrations (`migrated_sqlite`).
TEMPLATES = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "previously" / "migrated"


def migrations_state() -> str:
    """A name for the state of the migrations, of Django and the apps (the lock) and of Python:
    a migrated database made in one state is copied in that state only."""
    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update((ROOT / "requirements" / "lock.txt").read_bytes() + sys.version.encode())  # Django's and apps' own
    return digest.hexdigest()[:20]


@contextmanager
def _templates_locked():
    """Held while a template is made or copied, so parallel test workers make each once."""
    TEMPLATES.mkdir(parents=True, exist_ok=True)
    with open(TEMPLATES / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _migrate(env: dict) -> None:
    out = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, capture_output=True,
                         text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"manage.py migrate failed:\n{out.stdout}\n{out.stderr}")


def migrated_sqlite(env: dict) -> Path:
    """An empty SQLite database with every migration applied, made once per state of the
    migrations and of Django (a migrate is 8-15 s of a test module's set-up on 2 cores, issue 25
    point 4); callers copy it. Made under a lock, so parallel test workers make it once."""
    template = TEMPLATES / f"{migrations_state()}.sqlite3"
    with _templates_locked():
        if not template.exists():
            scratch = TEMPLATES / f"making-{os.getpid()}"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
            _migrate({**{k: v for k, v in env.items() if k != "DATABASE_URL"}, "PREVIOUSLY_VAR_DIR": str(scratch)})
            made = scratch / "previously.sqlite3"
            with closing(sqlite3.connect(made)) as db:  # all of it in the one file (WAL mode)
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            os.replace(made, template)
            shutil.rmtree(scratch)
    return template


def copy_of_migrated_postgresql(env: dict, cursor, name: str) -> None:
    """Make the PostgreSQL database `name` (dropping any of that name) a copy of an empty one with
    every migration applied, which is made once per state of the migrations on the server that
    env["DATABASE_URL"] names and kept there as `previously_migrated_<state>`, as
    migrated_sqlite keeps its file: migrating afresh was 10-11 s of each test worker's start on
    2 cores (issue 25 point 4). `cursor` is on the server's maintenance database. The template is
    migrated under another name and renamed when whole, so an interrupted run leaves none half
    made; templates of other states are dropped when a new one is made."""
    template = f"previously_migrated_{migrations_state()}"
    with _templates_locked():
        cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [r"previously\_migrated\_%"])
        kept = {row[0] for row in cursor.fetchall()}
        if template not in kept:
            making = f"{template}_making"
            cursor.execute(f'DROP DATABASE IF EXISTS "{making}" WITH (FORCE)')
            cursor.execute(f'CREATE DATABASE "{making}"')
            _migrate({**env, "DATABASE_URL": urlsplit(env["DATABASE_URL"])._replace(path=f"/{making}").geturl()})
            cursor.execute(f'ALTER DATABASE "{making}" RENAME TO "{template}"')
            for old in kept:
                cursor.execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        cursor.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process for port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing on 127.0.0.1:{port} after {timeout}s")


class Stack:
    def __init__(self, *, processes: int = 1, database_url: str = "", redis_url: str = "",
                 tasks: str = "thread", var_dir: str, env: dict | None = None, log_dir: str | None = None):
        self.processes, self.tasks = processes, tasks
        self.var_dir = Path(var_dir)
        self.log_dir = Path(log_dir or var_dir)
        self.env = {
            **os.environ,
            "PREVIOUSLY_VAR_DIR": str(self.var_dir),
            "PREVIOUSLY_TASKS_BACKEND": tasks,
            "PREVIOUSLY_IDLE_CHECK_SECONDS": "0",
            "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or "scale-out-local-" + "k" * 40,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        for key in ("DATABASE_URL", "REDIS_URL"):
            if not self.env[key]:
                del self.env[key]
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen] = []
        self.migrated = False

    def manage(self, *args: str, input: str | None = None, timeout: float = 300) -> str:
        out = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, input=input,
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def migrate(self) -> None:
        """Bring the database up to date, once: a new SQLite database in var/ is a copy of one
        migrated before (`migrated_sqlite`)."""
        if self.migrated:
            return
        self.var_dir.mkdir(parents=True, exist_ok=True)
        if self.env.get("DATABASE_URL") or (self.var_dir / "previously.sqlite3").exists():
            self.manage("migrate", "--noinput")
        else:
            shutil.copyfile(migrated_sqlite(self.env), self.var_dir / "previously.sqlite3")
        self.migrated = True

    def start(self) -> "Stack":
        self.migrate()
        for n in range(self.processes):
            port = free_port()
            # previously.server: Daphne with request bodies bounded before parsing (S4).
            proc = self._spawn(f"daphne-{n}", [sys.executable, "-m", "previously.server", "-b", "127.0.0.1",
                                               "-p", str(port), "previously.asgi:application"])
            wait_for_port(port, proc)
            self.ports.append(port)
        if self.tasks == "db":
            self.worker = self._spawn("worker", [sys.executable, "manage.py", "db_worker", "--no-reload",
                                                 "--interval", "0.2", "--no-startup-delay"])
        return self

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs.clear()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stack", description=__doc__)
    parser.add_argument("--processes", type=int, default=int(os.environ.get("PREVIOUSLY_PROCESSES", "2")),
                        help="Daphne processes (default: PREVIOUSLY_PROCESSES or 2)")
    parser.add_argument("--var-dir", default=os.environ.get("PREVIOUSLY_VAR_DIR", str(ROOT / "var")),
                        help="shared var/ directory (secret key, media, logs)")
    args = parser.parse_args()
    stack = Stack(processes=args.processes, database_url=os.environ.get("DATABASE_URL", ""),
                  redis_url=os.environ.get("REDIS_URL", ""), tasks="db", var_dir=args.var_dir)
    stack.start()
    print("Previously, scaled out on loopback:")
    for port in stack.ports:
        print(f"  http://127.0.0.1:{port}/")
    print(f"  task worker: manage.py db_worker (pid {stack.worker.pid}); logs in {stack.log_dir}")
    print("Ctrl+C stops everything.")
    try:
        while all(p.poll() is None for p in stack.procs):
            time.sleep(1)
        print("a process exited; stopping the rest", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
