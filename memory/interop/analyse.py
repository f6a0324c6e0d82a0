"""The recall index's analysis of an import's new lines, in a second process (BENCH §3).

Tokenising every new line for the recall index was a sixth of the legacy import's time, all
of it pure Python that needs nothing from the database. `Analyser` forks one worker when the
import starts (while the process is still small, and before it holds a transaction). When
the rows are ready the import hands it the texts, batch by batch, and goes on inserting;
the worker tokenises them all meanwhile and keeps the tokens until the import asks for a
batch, so this process never holds more than one batch of them (BENCH §3 memory).

The tokens are `memory.recall.tokenize.tokenize`'s own, computed by the same code in the
forked copy of this process. Where fork is unavailable or unsafe (other threads running),
or the worker fails, the texts are tokenised in this process instead, with the same result.
"""

import multiprocessing
import threading
import warnings
from collections.abc import Iterator
from multiprocessing.connection import Connection

from memory.recall.tokenize import tokenize


def analyse_texts(texts: list[str]) -> list[list[str]]:
    """The recall analyser over each text."""
    return [tokenize(text) for text in texts]


def _serve(conn: Connection, other_end: Connection) -> None:
    """The worker: for each request (a list of batches of texts), tokenise all of it, then
    send one batch's tokens at a time, as the import takes them. Ends when the pipe closes."""
    other_end.close()
    while True:
        try:
            batches = conn.recv()
        except (EOFError, OSError):
            return
        results = [analyse_texts(texts) for texts in batches]
        del batches
        while results:
            conn.send(results.pop(0))


class Analyser:
    """One worker process for an import's tokenising; `close()` when done (or use `with`)."""

    def __init__(self, *, parallel: bool = True):
        self._conn: Connection | None = None
        self._proc = None
        if parallel and _can_fork():
            try:
                ctx = multiprocessing.get_context("fork")
                here, there = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(there, here), name="previously-analyse", daemon=True)
                with warnings.catch_warnings():
                    # Python warns of fork whenever the process has other OS threads; here those
                    # are native library workers (numpy's OpenBLAS, which handles fork itself),
                    # never Python threads (_can_fork), and the child runs none of their code.
                    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
                    proc.start()
                there.close()
                self._conn, self._proc = here, proc
            except OSError:
                self._conn = self._proc = None

    @property
    def parallel(self) -> bool:
        return self._conn is not None

    def analyse(self, batches: list[list[str]]) -> Iterator[list[list[str]]]:
        """Start tokenising `batches` now; yields each batch's token lists, in order.

        Consume it to the end before the next call (an abandoned one ends the worker)."""
        sent = False
        if self._conn is not None:
            try:
                self._conn.send(batches)
                sent = True
            except (OSError, ValueError):
                self._stop()
        return self._results(batches, sent)

    def _results(self, batches: list[list[str]], sent: bool) -> Iterator[list[list[str]]]:
        received = 0
        try:
            for texts in batches:
                if sent and self._conn is not None:
                    try:
                        tokens = self._conn.recv()
                        received += 1
                        yield tokens
                        continue
                    except (EOFError, OSError):
                        self._stop()
                yield analyse_texts(texts)
        finally:
            if sent and received < len(batches):
                self._stop()  # answers left in the pipe would be taken for the next request's

    def _stop(self) -> None:
        conn, proc, self._conn, self._proc = self._conn, self._proc, None, None
        if conn is not None:
            conn.close()
        if proc is not None:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> "Analyser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _can_fork() -> bool:
    # Forking a process whose other threads may hold locks can deadlock the child.
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
