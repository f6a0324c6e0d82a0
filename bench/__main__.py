"""Run the benchmarks on a scratch SQLite database; write bench/results/*.json and SUMMARY.md.

Usage: python -m bench [--sizes 1000,10000,100000] [--turns 200]
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000", help="archive sizes for per-turn overhead")
    parser.add_argument("--turns", type=int, default=200, help="measured turns per size")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="previously-bench-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench import turn_overhead

    RESULTS.mkdir(exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = {"turn_overhead": turn_overhead.run(sizes=sizes, turns=args.turns)}
    for name, data in results.items():
        (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2, ensure_ascii=False))
    summary = "\n\n".join(turn_overhead.summary(results["turn_overhead"]) for _ in [0])
    (RESULTS / "SUMMARY.md").write_text(summary + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
