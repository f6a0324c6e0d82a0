"""`make bench`: BENCH.md §1 (LoCoMo recall), §2 (per-turn overhead, recall on a repeating archive),
§3 (legacy import), §4 (the last `make loadtest`), §5 (history import), and issue 24's real sizes
(deleting a 1M-character line, the full import and the data page's upload at 1M records, and
`make hostile`'s figures); scratch SQLite.

Writes bench/results/*.json (git-ignored), bench/results/SUMMARY.md and
bench/results/turn_overhead.png.

Usage: python -m bench [--sizes 1000,10000,100000] [--turns 150] [--rounds 3] [--skip-locomo]
       [--skip-import] [--import-keys 120000] [--import-runs 3] [--skip-forget] [--forget-chars N]
       [--skip-history]
       [--history-conversations 2000] [--history-messages 150000] [--skip-full-import] [--full-import-records N]
       [--skip-upload] [--upload-records N] [--skip-hostile]
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import load_average

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000", help="archive sizes for per-turn overhead")
    parser.add_argument("--turns", type=int, default=150, help="timed turns per round, size and algorithm")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per size; medians are reported")
    parser.add_argument("--skip-locomo", action="store_true", help="skip BENCH §1")
    parser.add_argument("--skip-import", action="store_true", help="skip BENCH §3")
    parser.add_argument("--import-keys", type=int, default=120_000, help="keys in the synthetic legacy dump")
    parser.add_argument("--import-runs", type=int, default=3, help="import runs; medians are reported")
    parser.add_argument("--skip-forget", action="store_true", help="skip deleting a 1M-character line")
    parser.add_argument("--forget-chars", type=int, default=1_000_000, help="length of the line deleted for good")
    parser.add_argument("--skip-history", action="store_true", help="skip BENCH §5")
    parser.add_argument("--history-conversations", type=int, default=2000, help="conversations in the ChatGPT export")
    parser.add_argument("--history-messages", type=int, default=150_000, help="messages in the ChatGPT export")
    parser.add_argument("--skip-full-import", action="store_true", help="skip the full import at size (issue 24 point 6)")
    parser.add_argument("--full-import-records", type=int, default=1_000_000, help="records in the imported export")
    parser.add_argument("--skip-upload", action="store_true", help="skip the data page's import at size (issue 24)")
    parser.add_argument("--upload-records", type=int, default=1_000_000, help="records in the uploaded export")
    parser.add_argument("--repeat-sizes", default="10000,100000",
                        help="archive sizes for recall on a repeating archive (issue 24 point 10); empty skips it")
    parser.add_argument("--skip-hostile", action="store_true", help="skip make hostile's figures (issue 24 points 1-5, 7-9)")
    parser.add_argument("--repeat-questions", type=int, default=200, help="LoCoMo questions asked at each size")
    args = parser.parse_args(argv)

    started_env = dict(os.environ)  # before the scratch database and production switches below
    scratch = Path(tempfile.mkdtemp(prefix="previously-bench-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ["DJANGO_DEBUG"] = "0"  # as in production: no per-query logging on the timed path
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench import (
        forget_long_line,
        full_import,
        history_import,
        hostile,
        import_throughput,
        import_upload,
        loadtest,
        locomo,
        recall_repeat,
        turn_overhead,
    )

    RESULTS.mkdir(exist_ok=True)
    began = time.perf_counter()
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.platform(),
            "cpus": os.cpu_count(), "load_before": load_average()}
    results: dict[str, dict] = {}
    sections: list[str] = []
    data, _ = locomo.build_input()
    if not args.skip_locomo:
        results["locomo"] = locomo.run(workdir=scratch)
        sections.append(locomo.summary(results["locomo"]))
        print(sections[-1], flush=True)
    meta["load_after_locomo"] = load_average()
    english = [d["text"].split(": ", 1)[1] for c in data["conversations"] for d in c["docs"]]
    questions = [q["question"] for c in data["conversations"] for q in c["queries"]]
    results["turn_overhead"] = turn_overhead.run(
        sizes=[int(s) for s in args.sizes.split(",") if s], turns=args.turns, rounds=args.rounds,
        english=english, questions=questions,
    )
    sections.append(turn_overhead.summary(results["turn_overhead"]))
    print(sections[-1], flush=True)
    if turn_overhead.plot(results["turn_overhead"], RESULTS / "turn_overhead.png"):
        sections.append("![per-turn overhead against archive size](turn_overhead.png)")
    if args.repeat_sizes:
        results["recall_repeat"] = recall_repeat.run(
            data=data, sizes=[int(s) for s in args.repeat_sizes.split(",") if s], n_questions=args.repeat_questions,
        )
        sections.append(recall_repeat.summary(results["recall_repeat"]))
        print(sections[-1], flush=True)
    sections.append(loadtest.summary(loadtest.last_results()))  # BENCH §4 from the last `make loadtest`
    print(sections[-1], flush=True)
    if not args.skip_import:
        results["import_throughput"] = import_throughput.run(keys=args.import_keys, runs=args.import_runs)
        sections.append(import_throughput.summary(results["import_throughput"]))
        print(sections[-1], flush=True)
    if not args.skip_forget:
        results["forget_long_line"] = forget_long_line.run(chars=args.forget_chars)
        sections.append(forget_long_line.summary(results["forget_long_line"]))
        print(sections[-1], flush=True)
    if not args.skip_history:
        results["history_import"] = history_import.run(
            conversations=args.history_conversations, messages=args.history_messages
        )
        sections.append(history_import.summary(results["history_import"]))
        print(sections[-1], flush=True)
    if not args.skip_full_import:
        results["full_import"] = full_import.run(records=args.full_import_records)
        sections.append(full_import.summary(results["full_import"]))
        print(sections[-1], flush=True)
    if not args.skip_upload:
        results["import_upload"] = import_upload.run(records=args.upload_records)
        sections.append(import_upload.summary(results["import_upload"]))
        print(sections[-1], flush=True)
    if not args.skip_hostile:
        results["hostile"] = hostile.run(started_env)
        sections.append(hostile.summary(results["hostile"]))
        print(sections[-1], flush=True)
    meta["load_after"] = load_average()
    meta["seconds"] = round(time.perf_counter() - began, 1)
    results["meta"] = meta
    for name, body in results.items():
        (RESULTS / f"{name}.json").write_text(json.dumps(body, indent=2, ensure_ascii=False))
    header = (f"# make bench — {meta['started']}\n\n{meta['machine']}, {meta['cpus']} CPUs; load average "
              f"(1/5/15 min) before {meta['load_before']}, after §1 {meta['load_after_locomo']}, "
              f"at the end {meta['load_after']}; {meta['seconds']} s in all.")
    (RESULTS / "SUMMARY.md").write_text("\n\n".join([header, *sections]) + "\n")
    print(f"\nWrote {RESULTS}/SUMMARY.md ({meta['seconds']} s)")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
