"""Rank a `locomo-recall-v1` protocol file with the chat's own recall (BENCH §1)."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from memory.management.output import progress as progress_display
from memory.management.output import table
from memory.retrieve_batch import ProtocolError, retrieve_batch


class Command(BaseCommand):
    help = (
        "Load each conversation of INPUT through the archive into a throwaway profile (rolled "
        "back, nothing is committed), rank its queries with the chat's recall, write OUTPUT."
    )

    def add_arguments(self, parser):
        parser.add_argument("input", help="a locomo-recall-v1 JSON file")
        parser.add_argument("output", help="where to write {results, latency_ms} as JSON")
        parser.add_argument("--k", type=int, default=20, help="ids per query, at least (default 20)")

    def handle(self, *args, input, output, k, **options):
        if k <= 0:
            raise CommandError("--k must be a positive number of ids per query.")
        try:
            data = json.loads(Path(input).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CommandError(f"Cannot read {input} as JSON: {e}") from e
        conversations = data.get("conversations") if isinstance(data, dict) else None
        total = len(conversations) if isinstance(conversations, list) else 0
        done = []
        try:
            with progress_display(self.stderr) as progress:

                def loaded(line: str) -> None:
                    done.append(line)
                    progress("conversations", len(done), total)
                    if options["verbosity"] > 1:
                        self.stderr.write(line)

                out = retrieve_batch(data, k=k, progress=loaded)
        except ProtocolError as e:
            raise CommandError(f"{input}: {e}") from e
        Path(output).write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
        ms = sorted(out["latency_ms"].values())
        p50 = f"{ms[len(ms) // 2]:.1f}" if ms else "—"
        self.stdout.write(table(["queries ranked", "p50 ms", "written to"], [[len(out["results"]), p50, output]]))
