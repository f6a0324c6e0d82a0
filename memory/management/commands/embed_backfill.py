"""Give archived lines their sentence vectors (SPEC R8): after an import, a migration, a
change of embedding model or of what a vector holds (the tag `<model>+prev1`: the line with its
previous line, issue 18). Bounded and resumable; lines without one are still found lexically.
The server's housekeeping does the same a bounded number of lines at a time
(PREVIOUSLY_EMBED_BACKFILL_LINES); this command does it all at once, with progress."""

from django.core.management.base import BaseCommand, CommandError

from memory.recall import embedding, vectors


class Command(BaseCommand):
    help = (
        "Embed indexed lines that have no vector of the configured model (PREVIOUSLY_EMBEDDINGS, else the "
        "connections page's choice), "
        "in short batches; run it again to resume."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=256, help="lines per batch and transaction (default 256)")
        parser.add_argument("--limit", type=int, default=None, help="stop after this many lines (default: all)")

    def handle(self, *args, batch, limit, **options):
        if batch <= 0 or (limit is not None and limit < 0):
            raise CommandError("--batch must be positive and --limit zero or more.")
        embedder = embedding.current()
        if embedder is None:
            raise CommandError(
                "Embeddings are off (PREVIOUSLY_EMBEDDINGS=off, or openai without "
                "PREVIOUSLY_EMBEDDING_MODEL and a base URL; or, with PREVIOUSLY_EMBEDDINGS unset, "
                "off or a connection's model without its connection on the connections page): nothing to backfill."
            )

        def progress(done: int, total: int) -> None:
            if options["verbosity"] > 0:
                self.stderr.write(f"{done}/{total} lines embedded")

        stored = vectors.backfill(batch=batch, limit=limit, progress=progress)
        self.stdout.write(f"Embedded {stored} lines with {embedder.name}.")
