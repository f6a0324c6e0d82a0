"""Issue 24 point 3: deleting a 1M-character line for good (SPEC D6, S4), on the bench's scratch
SQLite. The line is archived with a reply quoting it, a run whose transcript holds it whole, a
log entry and a card snapshot holding runs of it, beside `--forget-rows` small lines. A probe
thread takes SQLite's write lock (BEGIN IMMEDIATE) every 5 ms on its own connection: the
longest it waited is the longest the deletion held the lock at a time.

Goal: the delete ≤ 5 s, the write lock held ≤ 200 ms at a time."""

import contextlib
import os
import random
import sqlite3
import threading
import time

from bench.machine import load_average

GOALS = {"seconds": 5.0, "lock_ms": 200.0}
WORDS = "river lantern orchard copper meadow violet harbor quiet amber falcon willow ember".split()


class LockProbe:
    """Takes SQLite's write lock every `every` seconds from its own connection; `waits` are how
    long each BEGIN IMMEDIATE waited, i.e. how long someone else held the lock."""

    def __init__(self, path: str, every: float = 0.005):
        self.path, self.every = path, every
        self.waits: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        db = sqlite3.connect(self.path, timeout=600, isolation_level=None)
        while not self._stop.is_set():
            began = time.monotonic()
            db.execute("BEGIN IMMEDIATE")
            self.waits.append(time.monotonic() - began)
            db.execute("COMMIT")
            self._stop.wait(self.every)
        db.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=60)

    @property
    def longest_ms(self) -> float:
        return max(self.waits, default=0.0) * 1000


@contextlib.contextmanager
def _timed_transactions():
    """(wall ms, cpu ms) of each outermost transaction memory.deletion opens meanwhile: on a
    busy machine the probe's wall figure includes waiting for a CPU, the CPU figure does not."""
    from django.db import connection

    from memory import deletion

    atomic, out = deletion.transaction.atomic, []

    @contextlib.contextmanager
    def timed(*args, **kwargs):
        outermost = not connection.in_atomic_block
        wall, cpu = time.perf_counter(), time.process_time()
        with atomic(*args, **kwargs):
            yield
        if outermost:
            out.append(((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000))

    deletion.transaction.atomic = timed
    try:
        yield out
    finally:
        deletion.transaction.atomic = atomic


def long_line(chars: int, seed: int = 5) -> str:
    rng = random.Random(seed)
    words = " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 99999)}" for _ in range(chars // 8 + 1000))
    return words[:chars]


def run(*, chars: int = 1_000_000, rows: int = 2000) -> dict:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from memory.deletion import delete_message
    from memory.models import CardSnapshot, EvolutionRun, Message, Profile, Slice, SliceLogEntry

    user = get_user_model().objects.create_user(f"forget-{time.time_ns()}", password="x" * 12)
    profile = Profile.objects.create(user=user, key="owner", language="en")
    line = long_line(chars)
    now = timezone.now()
    slice_ = Slice.objects.create(profile=profile, key=now.strftime("%Y-%m-%d-%H%M"), started_at=now,
                                  last_message_at=now, tz="UTC")
    said = Message.objects.create(profile=profile, slice=slice_, mid="c_00000000000000b1", speaker="user",
                                  content=line, created_at=now)
    Message.objects.bulk_create([
        Message(profile=profile, slice=slice_, mid=f"{'c' if k % 2 else 'a'}_{0x10000 + k:016x}",
                speaker="user" if k % 2 else "assistant", content=f"small talk {k} about the day", created_at=now)
        for k in range(rows)])
    Message.objects.create(profile=profile, slice=slice_, mid="a_1760000001000_0001", speaker="assistant",
                           content="You wrote: " + line[5000:5200], created_at=now)
    EvolutionRun.objects.create(profile=profile, slice=slice_, trigger="slice_close", status="changed",
                                steps=[{"kind": "read", "transcript": "user: " + line}])
    SliceLogEntry.objects.create(slice=slice_, kind="note", summary="read", data={"said": line[900_000:900_300]})
    other = Slice.objects.create(profile=profile, key="2020-01-01-0000", started_at=now, last_message_at=now, tz="UTC")
    CardSnapshot.objects.create(profile=profile, slice=other, text="## Now\n- " + line[10_000:10_080])
    path = settings.DATABASES["default"]["NAME"]
    with LockProbe(str(path)) as probe, _timed_transactions() as transactions:
        time.sleep(0.1)
        began = time.perf_counter()
        cpu = time.process_time()
        result = delete_message(profile=profile, mid=said.mid, hard=True, force=True)
        seconds = time.perf_counter() - began
        cpu = time.process_time() - cpu
        time.sleep(0.1)
    longest = max(transactions, default=(0.0, 0.0))
    left = sum(line[i : i + 40] in t for t in [str(r.steps) for r in EvolutionRun.objects.filter(profile=profile)]
               for i in range(0, chars - 40, 99_991))
    return {
        "chars": chars, "rows": rows, "status": result.status, "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2), "lock_ms": round(probe.longest_ms, 1), "probes": len(probe.waits),
        "copies_left": left, "transactions": len(transactions),
        "longest_transaction_ms": round(longest[0], 1), "longest_transaction_cpu_ms": round(longest[1], 1), "loadavg": load_average(), "cpus": os.cpu_count(),
        "meets_goal": seconds <= GOALS["seconds"] and probe.longest_ms <= GOALS["lock_ms"] and not left,
    }


def summary(result: dict) -> str:
    return "\n".join([
        f"## Deleting a {result['chars']:,}-character line for good (issue 24 point 3, SQLite)",
        "",
        "| delete s (cpu s) | longest write-lock hold ms (probe) | longest transaction ms (cpu ms) "
        "| transactions | copies left |",
        "| --- | --- | --- | --- | --- |",
        f"| {result['seconds']} ({result['cpu_seconds']}) | {result['lock_ms']} ({result['probes']} probes) "
        f"| {result['longest_transaction_ms']} ({result['longest_transaction_cpu_ms']}) "
        f"| {result['transactions']} | {result['copies_left']} |",
        "",
        f"Goal (delete ≤ {GOALS['seconds']} s, lock held ≤ {GOALS['lock_ms']:.0f} ms at a time, no copy left): "
        f"{'met' if result['meets_goal'] else 'NOT met'}. Load average seen: {result['loadavg']} on "
        f"{result['cpus']} CPUs.",
    ])


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(summary(run()))
