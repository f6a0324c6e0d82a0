"""BENCH.md §3: legacy KV migration throughput (import, re-import, peak memory).

    python -m bench.import_throughput [--keys 120000] [--runs 3] [--json OUT]

The dump is bench.synthetic's: shaped like production (BENCH §3), every line
worded differently.

`run()` returns a dict of medians (and every run's numbers) for `make bench`.

Each run uses a fresh scratch SQLite database (DATABASE_URL in a temp dir, DJANGO_DEBUG=0)
and runs each phase in a child process of its own, so peak RSS (its VmHWM, `bench.machine.peak_rss_mb`) is
that phase's alone and no state is shared between phases:

- import: `import_kv()` of the synthetic dump into the empty database;
- re-import: the same dump again; the child checks that no row was written anywhere
  (row counts of every memory_* table before and after, and every "created" is 0);
- json.load: Python's json module parsing the same file, the baseline of the ratio.

Seconds are wall clock around the call itself (Django start-up and migrate excluded), with
the CPU seconds of the same span beside them (a shared machine inflates wall time only),
the import's tokenising worker included (also given alone);
peak MB is the child's maximum resident set, start-up included.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import load_numbers, peak_rss_mb

ROOT = Path(__file__).resolve().parent.parent
BARS = {"seconds_import": 10, "peak_rss_mb": 300, "seconds_reimport": 4}  # BENCH.md §3


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _child_env(db_dir: Path) -> dict:
    env = dict(os.environ)
    env["DATABASE_URL"] = f"sqlite:///{db_dir / 'bench.sqlite3'}"
    env["PREVIOUSLY_VAR_DIR"] = str(db_dir)
    env["DJANGO_DEBUG"] = "0"
    env["DJANGO_SETTINGS_MODULE"] = "previously.settings"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _child(args: list[str], db_dir: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.import_throughput", "--child", *args],
        cwd=ROOT,
        env=_child_env(db_dir),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- child phases


def _setup_django():
    import django

    django.setup()


def _row_counts() -> dict:
    from django.apps import apps

    return {m._meta.db_table: m.objects.count() for m in apps.get_app_config("memory").get_models()}


def _phase_setup() -> dict:
    _setup_django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    get_user_model().objects.create_superuser(username="bench", password="bench-pw-123")
    return {"ok": True}


def _phase_import(dump: str, *, expect_nothing: bool) -> dict:
    _setup_django()
    from memory.interop.kv_import import import_kv
    from memory.management.profiles import resolve_user

    user = resolve_user(None)
    before = _row_counts() if expect_nothing else None
    t0, c0, w0 = time.perf_counter(), time.process_time(), _children_cpu()
    with open(dump, encoding="utf-8") as fh:
        report = import_kv(fh=fh, user=user)
    seconds, cpu, worker = time.perf_counter() - t0, time.process_time() - c0, _children_cpu() - w0
    # CPU seconds count the import's tokenising worker too (memory.interop.analyse), joined by now.
    result = {"seconds": seconds, "cpu": cpu + worker, "worker_cpu": worker, "peak_mb": peak_rss_mb(),
              "total": report.as_dict()["total"]}
    if expect_nothing:
        after = _row_counts()
        changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
        if changed or report.as_dict()["total"]["created"]:
            raise SystemExit(f"re-import wrote rows: {changed} / {report.as_dict()['total']}")
    else:
        result["rows"] = _row_counts()
    return result


def _phase_json(dump: str) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    with open(dump, encoding="utf-8") as fh:
        data = json.load(fh)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": seconds, "cpu": cpu, "peak_mb": peak_rss_mb(), "keys": len(data)}


def _child_main(argv: list[str]) -> int:
    phase, *rest = argv
    if phase == "setup":
        result = _phase_setup()
    elif phase == "import":
        result = _phase_import(rest[0], expect_nothing=False)
    elif phase == "reimport":
        result = _phase_import(rest[0], expect_nothing=True)
    elif phase == "json":
        result = _phase_json(rest[0])
    else:
        raise SystemExit(f"unknown phase {phase}")
    print(json.dumps(result))
    return 0


# ---------------------------------------------------------------- parent


def run(*, keys: int = 120_000, runs: int = 3, seed: int = 1, dump: str | None = None) -> dict:
    """Import / re-import / json.load timings over `runs` fresh scratch databases; medians."""
    scratch = Path(tempfile.mkdtemp(prefix="previously-bench-import-"))
    try:
        if dump is None:
            from bench.synthetic import write_dump

            dump = str(scratch / f"dump-{keys}.json")
            n_keys = write_dump(dump, keys=keys, seed=seed)
        else:
            n_keys = None
        samples = []
        load_seen = [load_numbers()]
        for i in range(runs):
            db_dir = scratch / f"run{i}"
            db_dir.mkdir()
            _child(["setup"], db_dir)
            imp = _child(["import", dump], db_dir)
            load_seen.append(load_numbers())
            re = _child(["reimport", dump], db_dir)
            js = _child(["json", dump], db_dir)
            load_seen.append(load_numbers())
            n_keys = n_keys or js["keys"]
            samples.append(
                {
                    "import_s": round(imp["seconds"], 3),
                    "import_cpu_s": round(imp["cpu"], 3),
                    "import_worker_cpu_s": round(imp["worker_cpu"], 3),
                    "import_peak_mb": round(imp["peak_mb"], 1),
                    "reimport_s": round(re["seconds"], 3),
                    "reimport_cpu_s": round(re["cpu"], 3),
                    "reimport_peak_mb": round(re["peak_mb"], 1),
                    "json_load_s": round(js["seconds"], 3),
                    "json_load_cpu_s": round(js["cpu"], 3),
                    "ratio": round(imp["seconds"] / js["seconds"], 2),
                    "reimport_ratio": round(re["seconds"] / js["seconds"], 2),
                    "created": imp["total"]["created"],
                }
            )
            shutil.rmtree(db_dir, ignore_errors=True)

        def med(k):
            return round(statistics.median(s[k] for s in samples), 3)

        result = {
            "keys": n_keys,
            "runs": runs,
            "seconds_import": med("import_s"),
            "cpu_seconds_import": med("import_cpu_s"),
            "cpu_seconds_import_worker": med("import_worker_cpu_s"),
            "peak_rss_mb": med("import_peak_mb"),
            "seconds_reimport": med("reimport_s"),
            "cpu_seconds_reimport": med("reimport_cpu_s"),
            "peak_rss_mb_reimport": med("reimport_peak_mb"),
            "seconds_json_load": med("json_load_s"),
            "cpu_seconds_json_load": med("json_load_cpu_s"),
            "ratio": med("ratio"),
            "ratio_reimport": med("reimport_ratio"),
            "samples": samples,
            "loadavg": load_seen,
            "cpus": os.cpu_count(),
            "bars": BARS,
        }
        result["meets_bar"] = all(result[k] <= bar for k, bar in BARS.items())
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def summary(result: dict) -> str:
    return "\n".join(
        [
            f"## Migration throughput ({result['keys']} keys, median of {result['runs']} runs, SQLite)",
            "",
            "| import s (cpu s) | peak MB | re-import s (cpu s) | json.load s | import / json.load "
            "| re-import / json.load |",
            "| --- | --- | --- | --- | --- | --- |",
            f"| {result['seconds_import']} ({result['cpu_seconds_import']}) | {result['peak_rss_mb']} "
            f"| {result['seconds_reimport']} ({result['cpu_seconds_reimport']}) | {result['seconds_json_load']} "
            f"| {result['ratio']} | {result['ratio_reimport']} |",
            "",
            f"Bar (import ≤ {BARS['seconds_import']} s, peak ≤ {BARS['peak_rss_mb']} MB, re-import ≤ "
            f"{BARS['seconds_reimport']} s): {'met' if result['meets_bar'] else 'NOT met'}."
            f" Load average seen: {result['loadavg']} on {result['cpus']} CPUs.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.import_throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=120_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dump", help="Use this dump instead of generating one.")
    parser.add_argument("--json", help="Also write the result to this file.")
    args = parser.parse_args(argv)
    result = run(keys=args.keys, runs=args.runs, seed=args.seed, dump=args.dump)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
