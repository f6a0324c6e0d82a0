"""The LoCoMo tuning loop (BENCH §1): load the ten conversations once, rank under variants.

Usage:
    python -m bench.locomo_sweep [--db PATH] [--set FIELD=V1,V2 ...] [--fresh]

`make bench` runs the protocol command `retrieve_batch`, which loads every conversation
again into a rolled-back profile: right for a report, slow for choosing a weight. This loop
loads them once through the same write path (`archive_message`, one profile each, committed
to a scratch SQLite file that is reused while the data, the analyser and the embedding model
stay the same) and then ranks all 1,536 questions with `rank_messages` under the default
`RecallConfig` and under each variant: `--set dense_weight=0.4,0.8` tries each value with the
other fields at their default. A run of one configuration takes 10-20 s here.

The ten profiles share one FTS5 table, whose BM25 statistics (document count, average
length) span all of them, so the figures run about 0.005 R@5 / 0.01 R@10 below
`retrieve_batch`'s: compare the rows of one run with each other, and report
`make bench`. The weights in memory/recall/rank.py were chosen with this loop.
"""

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DB = REPO / "var" / "locomo-sweep.sqlite3"


def parse_sets(pairs: list[str], fields: dict[str, type]) -> list[tuple[str, object]]:
    """["dense_weight=0.4,0.8"] -> [("dense_weight", 0.4), ("dense_weight", 0.8)]; an unknown
    field or a value of the wrong type is a ValueError naming it."""
    variants = []
    for pair in pairs:
        name, sep, values = pair.partition("=")
        name = name.strip()
        if not sep or name not in fields:
            raise ValueError(f"--set {pair!r}: expected FIELD=V1,V2 with FIELD one of {', '.join(sorted(fields))}")
        for raw in values.split(","):
            try:
                variants.append((name, fields[name](raw.strip())))
            except ValueError as e:
                raise ValueError(f"--set {pair!r}: {raw.strip()!r} is not a {fields[name].__name__}") from e
    return variants


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo_sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"scratch SQLite file (default {DEFAULT_DB})")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=V1,V2", help="a RecallConfig field to vary")
    parser.add_argument("--fresh", action="store_true", help="load the conversations again")
    parser.add_argument("--data", type=Path, default=None, help="a locomo10.json-shaped file (default: BENCH's)")
    args = parser.parse_args(argv)
    args.db.parent.mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{args.db.resolve()}"
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    import django

    django.setup()
    from bench import locomo_loop

    try:
        variants = parse_sets(args.set, locomo_loop.config_fields())
    except ValueError as e:
        parser.error(str(e))
    loop = locomo_loop.Loop(data_path=args.data, fresh=args.fresh, say=print)
    print(locomo_loop.HEADER)
    print(loop.line("default", loop.rank()))
    for name, value in variants:
        print(loop.line(f"{name}={value}", loop.rank(**{name: value})))
    return 0


if __name__ == "__main__":
    began = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - began:.0f} s)", file=sys.stderr)
    sys.exit(code)

