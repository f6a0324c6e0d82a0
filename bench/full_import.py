"""Issue 16 point 2 (SPEC S4): the data page's import of our own export on a large file —
peak memory and time of the preview (dry run) and the apply, and how long another writer
waits for SQLite's lock meanwhile.

    python -m bench.full_import [--keys 200000] [--dir DIR]

Builds a scratch SQLite database in DIR (a temp dir by default): the synthetic legacy dump
(bench.synthetic, ~100k varied lines for 200k keys) imported with `import_kv` for
a user `admin`, then exported (`export_full`). Each phase then runs in a child process of its
own (peak RSS is that phase's alone), reading the export as the data page does — streamed
from the file (memory/interop/json_stream.py) — into a new user: `preview` is the dry run,
`apply` the import (on a fresh copy of the database). Meanwhile a thread saves a chat line
in admin's profile every 0.2 s and times each save: the longest wait and any failure (an
apply that held the write lock throughout made them fail with "database is locked").
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _env(work: Path) -> dict:
    env = dict(os.environ, PREVIOUSLY_VAR_DIR=str(work), DJANGO_DEBUG="0", DJANGO_SETTINGS_MODULE="previously.settings",
               DJANGO_SUPERUSER_PASSWORD="pw-bench-12345")
    env.pop("DATABASE_URL", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _manage(work: Path, *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=_env(work), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def build(work: Path, keys: int) -> Path:
    dump, export = work / "dump.json", work / "export.json"
    _manage(work, "migrate", "-v0")
    _manage(work, "createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.com")
    subprocess.run([sys.executable, "-m", "bench.synthetic", str(dump), "--keys", str(keys)], cwd=ROOT,
                   env=_env(work), check=True, stdout=subprocess.DEVNULL)
    _manage(work, "import_kv", str(dump))
    _manage(work, "export_full", "--user", "admin", "--output", str(export))
    shutil.copy(work / "previously.sqlite3", work / "base.sqlite3")
    return export


def child(mode: str, export: str) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from memory.interop.full_import import import_full
    from memory.interop.json_stream import ExportFile
    from memory.models import Message, Profile, Slice

    target = get_user_model().objects.create_user(username=f"t{uuid.uuid4().hex[:8]}", password="pw-bench-12345")
    other = Profile.objects.get(user__username="admin", key="owner")
    other_slice = Slice.objects.filter(profile=other).order_by("-started_at").first()
    waits, failures, stop = [], [], threading.Event()

    def writer() -> None:
        while not stop.is_set():
            began = time.monotonic()
            try:
                Message.objects.create(profile=other, slice=other_slice, mid=f"c_{uuid.uuid4().hex[:16]}",
                                       speaker="user", content="said meanwhile", created_at=timezone.now())
                waits.append(time.monotonic() - began)
            except Exception as exc:  # noqa: BLE001 — counted and shown
                failures.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.2)
        connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    began = time.monotonic()
    report = import_full(data=ExportFile(lambda: open(export, "rb")), user=target, dry_run=mode == "preview")
    seconds = time.monotonic() - began
    stop.set()
    thread.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{mode:8} {seconds:6.1f} s  peak RSS {peak:5.0f} MB  lines {report.counts['messages']['created']:,}"
          f"  other writer: {len(waits)} saves, longest wait {max(waits, default=0):.2f} s, {len(failures)} failed"
          + (f" ({failures[0]})" if failures else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--dir", help="Work here (kept) instead of a temporary directory.")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "EXPORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-full-import-"))
    work.mkdir(parents=True, exist_ok=True)
    export = build(work, args.keys)
    print(f"export: {export.stat().st_size / 1e6:.0f} MB ({args.keys:,} legacy keys)")
    for mode in ("preview", "apply"):
        shutil.copy(work / "base.sqlite3", work / "previously.sqlite3")
        subprocess.run([sys.executable, "-m", "bench.full_import", "--child", mode, str(export)], cwd=ROOT,
                       env=_env(work), check=True)
    if not args.dir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
