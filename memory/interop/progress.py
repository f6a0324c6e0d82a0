"""A progress line for long commands (SPEC X5): a bar on a terminal, nothing otherwise."""

from collections.abc import Callable


def progress_for(stream) -> Callable[[str, int, int], None]:
    """A progress callback drawing on `stream` when it is a terminal."""
    isatty = getattr(getattr(stream, "_out", stream), "isatty", lambda: False)
    if not isatty():
        return lambda stage, done, total: None

    def draw(stage: str, done: int, total: int) -> None:
        if total:
            filled = int(30 * done / total)
            stream.write(f"\r{stage:<10} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}", ending="")
            if done >= total:
                stream.write("")
        else:
            stream.write(f"\r{stage:<10} {done} keys", ending="")
        stream.flush()

    return draw
