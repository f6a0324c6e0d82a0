"""What long commands print (SPEC X5): one progress display and one summary-table printer.

Progress is drawn with rich on a terminal (a bar when the total is known, a counter when it is
not); elsewhere (a log, a pipe, a test) each stage writes one plain line when it completes, so
logs say how far it got without filling up. Tables are rich tables rendered as plain text, the
first column left-aligned and numbers right-aligned, the same for every command.
"""

import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from django.core.management.base import CommandError
from django.utils import translation
from django.utils.translation import gettext, pgettext_lazy
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

ProgressCallback = Callable[[str, int, int], None]
TABLE_WIDTH = 120


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, total: Sequence[object] | None = None) -> str:
    """The rows under their headers as plain text (a `total` row below a rule when given)."""
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="", show_footer=False)
    for i, header in enumerate(headers):
        grid.add_column(str(header), justify="left" if i == 0 else "right", no_wrap=i > 0, overflow="fold")
    for row in rows:
        grid.add_row(*(str(cell) for cell in row))
    if total is not None:
        grid.add_section()
        grid.add_row(*(str(cell) for cell in total))
    buffer = io.StringIO()
    Console(file=buffer, width=TABLE_WIDTH, color_system=None, force_terminal=False, legacy_windows=False).print(grid)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())


def _is_terminal(stream) -> bool:
    return bool(getattr(getattr(stream, "_out", stream), "isatty", lambda: False)())


@contextmanager
def progress(stream) -> Iterator[ProgressCallback]:
    """A callback `(stage, done, total)` showing progress on `stream` (a command's stderr or
    stdout); total 0 means not known yet."""
    if not _is_terminal(stream):
        finished: set[str] = set()

        def line(stage: str, done: int, total: int) -> None:
            if total and done >= total and stage not in finished:
                finished.add(stage)
                stream.write(f"  {stage}: {done}/{total}")

        yield line
        return
    console = Console(file=getattr(stream, "_out", stream), stderr=False)
    bars = Progress(
        SpinnerColumn(), TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    )
    tasks: dict[str, int] = {}

    def draw(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bars.add_task(stage, total=total or None)
        bars.update(tasks[stage], completed=done, total=total or None)

    with bars:
        yield draw


def counted[T](items: Iterable[T], callback: ProgressCallback, stage: str, *, total: int = 0, every: int = 200) -> Iterator[T]:
    """`items`, reporting to `callback` every `every` items and once at the end."""
    done = 0
    for item in items:
        yield item
        done += 1
        if done % every == 0:
            callback(stage, done, total)
    callback(stage, done, total or done)


# The import tables' headings (the commands' COLUMNS and their own), as they are shown.
COLUMNS = {
    "family": pgettext_lazy("import table", "family"),
    "total": pgettext_lazy("import table", "total"),
    "read": pgettext_lazy("import table", "read"),
    "created": pgettext_lazy("import table", "created"),
    "existing": pgettext_lazy("import table", "existing"),
    "merged": pgettext_lazy("import table", "merged"),
    "duplicate": pgettext_lazy("import table", "duplicate"),
    "tombstoned": pgettext_lazy("import table", "tombstoned"),
    "soft_deleted": pgettext_lazy("import table", "soft_deleted"),
    "flagged": pgettext_lazy("import table", "flagged"),
    "errors": pgettext_lazy("import table", "errors"),
    "kind": pgettext_lazy("import table", "kind"),
    "conversation": pgettext_lazy("import table", "conversation"),
    "lines": pgettext_lazy("import table", "lines"),
    "alternatives": pgettext_lazy("import table", "alternatives"),
    "skipped": pgettext_lazy("import table", "skipped"),
    "images found/missing": pgettext_lazy("import table", "images found/missing"),
    "dates": pgettext_lazy("import table", "dates"),
    "already archived": pgettext_lazy("import table", "already archived"),
    "kept out (deleted)": pgettext_lazy("import table", "kept out (deleted)"),
    "new": pgettext_lazy("import table", "new"),
    "skipped kind": pgettext_lazy("import table", "skipped kind"),
    "count": pgettext_lazy("import table", "count"),
}


def column(name: str) -> str:
    """An import table's heading (read, created, existing, …) in the interface language."""
    return str(COLUMNS.get(name, name))


def finished(*, dry_run: bool) -> str:
    """An import command's last line."""
    return gettext("dry run: nothing was written") if dry_run else gettext("import complete")


def add_language_argument(parser) -> None:
    """`--language`: the language a command's refusals and notes are written in (U-series)."""
    parser.add_argument("--language", help="Write refusals in this interface language (e.g. zh-hans); default English.")


@contextmanager
def in_language(code: str | None) -> Iterator[None]:
    """Translate in `code` (an interface language, or a profile language such as zh) for the block."""
    if not code:
        yield
        return
    try:
        language = translation.get_supported_language_variant(code)
    except LookupError:
        raise CommandError(f"--language {code!r} is not an interface language", returncode=2) from None
    with translation.override(language):
        yield
