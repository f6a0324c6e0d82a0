"""`make loadtest` (BENCH.md §4): N concurrent websocket chats against the real app on
loopback, with a local OpenAI-compatible server streaming the replies.

One user logs in through the real login form and chats on N profiles at once (one socket
each, T turns each). Each chat is paced like a person: the sockets open over a ramp of a few
seconds, and after a reply ends the person reads and types for a random think time before the
next message (`--think 5-15` seconds by default); `--think 0` is a burst instead — all N send at
once, back to back — which measures capacity, not the delay a person sees.
Reported per scenario: the first-token delay the app adds (time from sending the frame to the
first token frame, minus the model server's own first-token delay), p50/p99; messages lost or
duplicated (the archive compared to what was sent); errors; the CPU each turn cost the app's
servers, its task worker and PostgreSQL (read from /proc over the run), and how fast the
machine ran Python before the scenario (`bench.machine.cpu_reference`): a shared machine's
speed changes, and the delay with it.
Scenarios: one process (SQLite, in-process layer); two processes + Redis + PostgreSQL + a
task worker; and each again with card evolutions running meanwhile. The app runs with its
production settings (DJANGO_DEBUG=0), over plain http on loopback.
Bounded: fixed N and T, and every wait has a timeout. Results: bench/results/loadtest.json.
"""

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import cpu_reference, cpu_seconds, load_average  # noqa: E402
from bench.stack import PRODUCTION_OVER_HTTP, Stack  # noqa: E402
from previously.chat import steps  # noqa: E402
from tests.webclient import WebClient  # noqa: E402

RESULTS = ROOT / "bench" / "results"
FIRST_TOKEN = 0.05  # the model server's own first-token delay (s)
CHUNKS, CHUNK_GAP = 5, 0.02  # the reply's chunks and the seconds between them (`--chunks`, `--chunk-gap`)


class ModelServer:
    """An OpenAI-compatible server in a process of its own (as a real model server is, so its
    work never waits on the load generator's interpreter): streams chat replies; answers the
    agent's (non-streamed) calls slowly, with a card edit, so evolutions take a while."""

    def __init__(self, chunks: int = CHUNKS, gap: float = CHUNK_GAP):
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs, chunks, gap), daemon=True)
        self.process.start()
        if not ours.poll(30):
            raise RuntimeError("the model server did not start")
        self.port = ours.recv()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(10)


def _serve(pipe, chunks: int, gap: float) -> None:
    async def main():
        server = await asyncio.start_server(functools.partial(_answer, chunks=chunks, gap=gap), "127.0.0.1", 0,
                                            backlog=1024)
        pipe.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


async def _answer(reader, writer, *, chunks: int, gap: float):
    """One connection: requests answered one after another until the client closes it, as
    real OpenAI-compatible servers (llama.cpp, vLLM, Ollama) keep connections alive; a stream
    goes out in chunked encoding, as theirs does."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length) or b"{}")
            if body.get("stream"):
                await _stream(writer, chunks, gap)
            else:
                await _complete(writer, body)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _stream(writer, chunks: int, gap: float) -> None:
    def chunk(data: bytes) -> bytes:
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    await asyncio.sleep(FIRST_TOKEN)
    for k in range(chunks):
        event = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": f"word{k} "}, "finish_reason": None}]}
        writer.write(chunk(b"data: " + json.dumps(event).encode() + b"\n\n"))
        await writer.drain()
        await asyncio.sleep(gap)
    end = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    writer.write(chunk(b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


async def _complete(writer, body: dict) -> None:
    await asyncio.sleep(0.5)  # a slow agent step
    if body.get("tools"):
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": uuid.uuid4().hex[:8], "type": "function",
            "function": {"name": "set_portrait", "arguments": json.dumps({"text": f"Portrait {time.time()}"})}}]}
    else:
        message = {"role": "assistant", "content": json.dumps({"worth": True, "reason": "load"})}
    payload = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                          "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    await writer.drain()


SETUP = """
import json
from django.contrib.auth import get_user_model
from memory.models import Profile
User = get_user_model()
user = User.objects.filter(username="load").first() or User.objects.create_user("load", password="pw-load-12345")
for n in range({n}):
    Profile.objects.get_or_create(user=user, key=f"p{{n}}", defaults={{"language": "en"}})
"""

COUNT = """
import json
from collections import Counter
from memory.models import Message
rows = Message.objects.filter(profile__user__username="load").values_list("profile__key", "mid", "speaker")
users = Counter((k, m) for k, m, s in rows if s == "user")
print(json.dumps({{"user_mids": [m for (k, m) in users], "dups": sum(c - 1 for c in users.values()),
                  "replies": sum(1 for k, m, s in rows if s == "assistant")}}))
"""


@dataclass(frozen=True)
class Pace:
    """How a simulated person chats: sockets open spread over `ramp` seconds; between a reply's
    end and the next message, a think time drawn from [think_min, think_max] (0: no pause)."""

    ramp: float = 0.0
    think_min: float = 0.0
    think_max: float = 0.0

    def think(self, rng: random.Random) -> float:
        return rng.uniform(self.think_min, self.think_max)


async def chat(url: str, headers: dict, key: str, turns: int, out: dict, pace: Pace = Pace(), rng=None) -> None:
    import websockets

    rng = rng or random.Random(key)
    await asyncio.sleep(rng.uniform(0, pace.ramp))
    async with websockets.connect(url, additional_headers=headers, open_timeout=60, max_size=None) as ws:
        for t in range(turns):
            await asyncio.sleep(pace.think(rng))
            mid = "c_" + uuid.uuid4().hex[:16]
            out["sent"].append(mid)
            start = time.perf_counter()
            await ws.send(json.dumps({"action": "send", "mid": mid, "text": f"hello {key} {t}", "tz": "UTC"}))
            first = None
            async with asyncio.timeout(60):
                while True:
                    frame = await ws.recv()
                    if first is None and f'<span id="reply-{mid}-content"' in frame:
                        first = time.perf_counter() - start
                    if f"outerHTML:#reply-{mid}" in frame:
                        if "reply failed" in frame:
                            out["errors"].append(f"{key}: reply failed")
                        break
            if first is not None:
                out["ttft"].append(first)
                out["samples"].append((t, start - out["t0"], first))


async def drive(stack: Stack, n: int, turns: int, evolutions: int, pace: Pace) -> dict:
    bases = [f"http://127.0.0.1:{p}" for p in stack.ports]
    client = WebClient(bases[0])
    await asyncio.to_thread(client.login, "load", "pw-load-12345")
    await asyncio.to_thread(client.get, "/")
    out = {"sent": [], "ttft": [], "errors": [], "samples": [], "t0": time.perf_counter()}
    if evolutions:
        # Earlier conversations on some profiles, then "new conversation": their evolution runs
        # (each ~12 slow model calls) are under way while the measured chats run.
        warm = {"sent": [], "ttft": [], "errors": [], "samples": [], "t0": time.perf_counter()}
        await asyncio.gather(*(chat(*client.ws_args(f"p{k}", bases[k % len(bases)]), f"p{k}", 1, warm)
                               for k in range(evolutions)))
        for k in range(evolutions):
            await asyncio.to_thread(client.post, f"/chat/new/?profile=p{k}", {}, bases[k % len(bases)])
        await asyncio.sleep(1.0)
        out["sent"].extend(warm["sent"])
    # The servers' logs from here on hold the measured turns' steps (`step_times`), not the warm-up's.
    out["logs_from"] = {path: path.stat().st_size for path in server_logs(stack)}
    started = time.perf_counter()
    results = await asyncio.gather(
        *(chat(*client.ws_args(f"p{k}", bases[k % len(bases)]), f"p{k}", turns, out, pace) for k in range(n)),
        return_exceptions=True,
    )
    out["errors"].extend(f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException))
    out["wall"] = time.perf_counter() - started
    return out


def pg_backends(database_url: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving `database_url`'s database."""
    server, _, name = database_url.rpartition("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        pids = [pid for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,))]
    return {pid: cpu for pid in pids if (cpu := cpu_seconds(pid)) is not None}


def cpu_now(stack: Stack, database_url: str) -> dict[str, dict[int, float]]:
    """CPU seconds so far by kind: the app's server processes, its task worker (if any) and the
    PostgreSQL backends serving its database (if on PostgreSQL), each by process id."""
    kinds = {"servers": stack.procs[: stack.processes], "worker": stack.procs[stack.processes :]}
    now = {kind: {p.pid: cpu_seconds(p.pid) or 0.0 for p in procs} for kind, procs in kinds.items()}
    now["postgresql"] = pg_backends(database_url) if database_url else {}
    return now


def percentile(ordered: list[float], p: float) -> float | None:
    """The `p`th percentile of values in ascending order (the value at that rank), to 0.1; None
    for none."""
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 1) if ordered else None


def server_logs(stack: Stack) -> list[Path]:
    """The log file of each of the stack's server processes."""
    return [stack.log_dir / f"daphne-{n}.log" for n in range(stack.processes)]


def step_times(logs_from: dict[Path, int]) -> dict[str, list[float]]:
    """Each step's own time in the servers' turns (`previously.chat.steps`), ms: [p50, p99] by
    step, in the turn's order; a step is the time from the one before it (the first: from the
    frame). Read from each log from its given offset on (the measured turns)."""
    own: dict[str, list[float]] = {}
    for path, offset in logs_from.items():
        with path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
        for line in text.splitlines():
            if (marks := steps.parse(line)) is None:
                continue
            before = 0.0
            for name, at in marks.items():
                own.setdefault(name, []).append(at - before)
                before = at
            own.setdefault("total", []).append(before)
    return {name: [round(statistics.median(v), 1), percentile(sorted(v), 99)] for name, v in own.items()}


def cpu_per_turn(before: dict, after: dict, turns: int) -> dict[str, float | None]:
    """Milliseconds of CPU per turn by kind between two `cpu_now` readings (None: no such
    process). A backend that opened meanwhile counts from zero."""
    return {kind: round(sum(cpu - before[kind].get(pid, 0.0) for pid, cpu in pids.items()) * 1000 / max(turns, 1), 1)
            if pids else None for kind, pids in after.items()}


def scenario(name: str, *, n: int, turns: int, processes: int, database_url: str = "", redis_url: str = "",
             tasks: str = "thread", evolutions: int = 0, pace: Pace = Pace(), log_dir: str = "",
             chunks: int = CHUNKS, chunk_gap: float = CHUNK_GAP) -> dict:
    model = ModelServer(chunks, chunk_gap)
    try:
        with tempfile.TemporaryDirectory(prefix="loadtest-") as var:
            if log_dir:
                Path(log_dir, name).mkdir(parents=True, exist_ok=True)
            stack = Stack(processes=processes, database_url=database_url, redis_url=redis_url, tasks=tasks, var_dir=var,
                          log_dir=str(Path(log_dir, name)) if log_dir else None,
                          env={"PREVIOUSLY_LLM_BASE_URL": model.base_url, "PREVIOUSLY_LLM_MODEL": "m",
                               "PREVIOUSLY_TURN_ANALYZER_MODEL": "0", "PREVIOUSLY_LOG_LEVEL": "WARNING",
                               "PREVIOUSLY_TURN_STEPS": "1",
                               **PRODUCTION_OVER_HTTP})
            stack.migrate()
            stack.manage("shell", "-c", SETUP.format(n=max(n, evolutions)))
            with stack:
                cpu_before = cpu_now(stack, database_url)
                out = asyncio.run(drive(stack, n, turns, evolutions, pace))
                cpu = cpu_per_turn(cpu_before, cpu_now(stack, database_url), len(out["sent"]))
                time.sleep(1.0)
                counted = json.loads(stack.manage("shell", "-c", COUNT.format()).strip().splitlines()[-1])
                runs = stack.manage("shell", "-c", "from collections import Counter; from memory.models import "
                                    "EvolutionRun as R; print(dict(Counter(R.objects.values_list('status', flat=True))))")
                runs = runs.strip().splitlines()[-1]
            turn_steps = step_times(out["logs_from"])
    finally:
        model.stop()
    added = sorted(max(0.0, t - FIRST_TOKEN) * 1000 for t in out["ttft"])
    archived = set(counted["user_mids"])
    lost = [m for m in out["sent"] if m not in archived]

    return {
        "scenario": name, "n": n, "turns_each": turns, "processes": processes,
        "ramp_s": pace.ramp, "think_s": [pace.think_min, pace.think_max],
        "database": "postgresql" if database_url else "sqlite", "channel_layer": "redis" if redis_url else "in-memory",
        "evolutions": evolutions, "evolution_runs": runs,
        "turns_measured": len(added), "added_first_token_ms_p50": round(statistics.median(added), 1) if added else None,
        "added_first_token_ms_p99": percentile(added, 99), "added_first_token_ms_max": round(added[-1], 1) if added else None,
        "model_first_token_ms": FIRST_TOKEN * 1000, "reply_chunks": chunks, "chunk_gap_s": chunk_gap,
        "sent": len(out["sent"]), "lost": len(lost), "duplicated": counted["dups"],
        "replies_archived": counted["replies"], "errors": len(out["errors"]), "error_samples": out["errors"][:5],
        "wall_s": round(out["wall"], 1), "cpu_ms_per_turn": cpu, "steps_ms": turn_steps,
        "samples": [(t, round(at, 3), round(first * 1000, 1)) for t, at, first in sorted(out["samples"], key=lambda x: x[1])],
    }


GOAL_P99_MS = 100  # BENCH §4: added first-token delay p99, every scenario, 0 lost or duplicated


def last_results() -> list[dict]:
    """The rows of the last `make loadtest` (bench/results/loadtest.json), or none."""
    path = RESULTS / "loadtest.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def cpu_text(cpu: dict | None) -> str:
    """"38.2 / – / –": servers / task worker / PostgreSQL, ms per turn ("?" for an older row)."""
    if not cpu:
        return "?"
    return " / ".join("–" if cpu.get(kind) is None else f"{cpu[kind]:.1f}" for kind in ("servers", "worker", "postgresql"))


def summary(rows: list[dict]) -> str:
    """BENCH §4 (issue 24 point 11) as a Markdown section, with the goal beside each figure."""
    lines = ["### Live chat under load (BENCH §4, issue 24 point 11; `make loadtest`)", ""]
    if not rows:
        return "\n".join([*lines, "No results yet: run `make loadtest` (LOADTEST_ARGS=\"--n 50\" for a quick one)."])
    lines += [
        f"Goal: added first-token delay p99 ≤ {GOAL_P99_MS} ms in every scenario, 0 lost, 0 duplicated; "
        "an evolution run in progress does not change it. From the last `make loadtest`"
        + (f", {rows[0]['finished']}" if rows[0].get("finished") else "") + ".",
        "",
        "CPU ms/turn: what each turn cost the app's servers / task worker / PostgreSQL. CPU ref: seconds "
        "this machine took for a fixed piece of Python before the scenario (lower is faster). "
        f"Each reply streamed {rows[0].get('reply_chunks', CHUNKS)} chunks, "
        f"{rows[0].get('chunk_gap_s', CHUNK_GAP) * 1000:g} ms apart.",
        "",
        "| scenario | N × turns | p50 ms | p99 ms | max ms | lost | dup | errors | CPU ms/turn | CPU ref s "
        "| load average (1/5/15) | goal |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |",
    ]
    for r in rows:
        p99 = r.get("added_first_token_ms_p99")
        ok = p99 is not None and p99 <= GOAL_P99_MS and not r["lost"] and not r["duplicated"] and not r["errors"]
        lines.append(
            f"| {r['scenario']} | {r['n']} × {r['turns_each']} | {r['added_first_token_ms_p50']} | {p99} "
            f"| {r.get('added_first_token_ms_max')} | {r['lost']} | {r['duplicated']} | {r['errors']} "
            f"| {cpu_text(r.get('cpu_ms_per_turn'))} | {r.get('cpu_reference', '?')} "
            f"| {r.get('load_before', '?')} → {r.get('load_after', '?')} | {'met' if ok else 'NOT met'} |"
        )
    timed = [r for r in rows if r.get("steps_ms")]
    if timed:
        names = list(dict.fromkeys(name for r in timed for name in r["steps_ms"]))
        lines += [
            "", "Where a turn's time went in the server, frame to first token (`PREVIOUSLY_TURN_STEPS`): each step's "
            "own time, p50 / p99 ms. checked: session check and turn lease; vector: the line's sentence vector; "
            "archived: the archive write; prepared: recall, card and prompt (in the archive write's database call); "
            "echoed: the line sent back; started: the reply's frame; model: the model's first token (its own 50 ms included); token: that token sent.",
            "", "| scenario | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names),
        ]
        for r in timed:
            cells = (r["steps_ms"].get(name) for name in names)
            lines.append(f"| {r['scenario']} | " + " | ".join(f"{c[0]} / {c[1]}" if c else "–" for c in cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loadtest", description=__doc__)
    parser.add_argument("--n", type=int, default=200, help="concurrent chats (default 200)")
    parser.add_argument("--turns", type=int, default=3, help="messages per chat (default 3)")
    parser.add_argument("--think", default="5-15",
                        help="seconds a person reads and types between a reply and the next message, "
                             "MIN-MAX (default 5-15); 0 sends back to back (a burst: capacity)")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which the sockets open (default 10)")
    parser.add_argument("--evolutions", type=int, default=10, help="evolution runs under way in the 'with evolution' scenarios")
    parser.add_argument("--database-url", default=os.environ.get("LOADTEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--redis-url", default=os.environ.get("LOADTEST_REDIS_URL", "redis://127.0.0.1:6379/14"))
    parser.add_argument("--log-dir", default="", help="keep each process's log here (default: thrown away)")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--chunks", type=int, default=CHUNKS,
                        help=f"chunks in each streamed reply (default {CHUNKS}); a real model streams one per "
                             "token: --chunks 100 --chunk-gap 0.01 is a 100-token reply at 100 tokens/s")
    parser.add_argument("--chunk-gap", type=float, default=CHUNK_GAP,
                        help=f"seconds between a reply's chunks (default {CHUNK_GAP})")
    args = parser.parse_args(argv)
    low, _, high = args.think.partition("-")
    pace = Pace(ramp=args.ramp, think_min=float(low), think_max=float(high or low))
    rows = []
    wanted = set(filter(None, args.only.split(",")))

    def pg_db() -> str:
        name = f"previously_load_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(f"{args.database_url}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop(name: str) -> None:
        with psycopg.connect(f"{args.database_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    plans = [
        ("one-process", dict(processes=1)),
        ("one-process+evolution", dict(processes=1, evolutions=args.evolutions)),
        ("two-processes+redis+pg", dict(processes=2, tasks="db", pg=True)),
        ("two-processes+redis+pg+evolution", dict(processes=2, tasks="db", pg=True, evolutions=args.evolutions)),
    ]
    for name, plan in plans:
        if wanted and name not in wanted:
            continue
        pg = plan.pop("pg", False)
        db = pg_db() if pg else ""
        try:
            print(f"== {name}: N={args.n} × {args.turns} turns, think {args.think} s", flush=True)
            before, reference = load_average(), cpu_reference()
            rows.append(scenario(name, n=args.n, turns=args.turns, pace=pace, log_dir=args.log_dir,
                                 chunks=args.chunks, chunk_gap=args.chunk_gap,
                                 database_url=f"{args.database_url}/{db}" if db else "",
                                 redis_url=args.redis_url if pg else "", **plan))
            rows[-1].update(load_before=before, load_after=load_average(), cpu_reference=reference,
                            finished=time.strftime("%Y-%m-%d %H:%M"))
        finally:
            if db:
                drop(db)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "loadtest.json").write_text(json.dumps(rows, indent=1))
    print(summary(rows))
    print(f"\n{'scenario':36} {'N':>4} {'turns':>6} {'p50 ms':>7} {'p99 ms':>7} {'lost':>5} {'dup':>4} {'err':>4} {'wall s':>7}")
    for r in rows:
        print(f"{r['scenario']:36} {r['n']:>4} {r['turns_measured']:>6} {r['added_first_token_ms_p50']!s:>7} "
              f"{r['added_first_token_ms_p99']!s:>7} {r['lost']:>5} {r['duplicated']:>4} {r['errors']:>4} {r['wall_s']:>7}")
    print(f"(added first-token delay = first token frame − send − the model's own {FIRST_TOKEN * 1000:.0f} ms)")
    bad = [r for r in rows if r["lost"] or r["duplicated"] or r["errors"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
