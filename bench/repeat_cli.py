"""`python -m bench.repeat_cli`: BENCH §2's recall on a repeating archive alone (bench.recall_repeat),
on a scratch SQLite file, with `--profile` for cProfile's top lines at the largest size."""

import argparse
import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.repeat_cli", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top lines at the largest size")
    parser.add_argument("--keep", default="", help="build the archive in this SQLite file and keep it")
    parser.add_argument("--reuse", default="", help="an archive kept by --keep: measure and profile it, no loading")
    args = parser.parse_args(argv)
    path = Path(args.reuse or args.keep or Path(tempfile.mkdtemp(prefix="previously-repeat-")) / "bench.sqlite3")
    os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from bench import locomo, recall_repeat

    call_command("migrate", verbosity=0)
    data, _ = locomo.build_input()
    if args.reuse:
        print(recall_repeat.remeasure(data, n_questions=args.questions, rounds=args.rounds, profile_at_end=args.profile))
        return 0
    result = recall_repeat.run(data=data, sizes=[int(s) for s in args.sizes.split(",") if s],
                               n_questions=args.questions, rounds=args.rounds, profile_at_end=args.profile)
    print(recall_repeat.summary(result))
    if args.profile:
        print(result["profile"])
    if not args.keep:
        path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
