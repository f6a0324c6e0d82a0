"""The import's outcome (LEGACY_KV.md rules 8, 9): the per-family table, notes, refusals."""

from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils.translation import gettext

from memory.phrases import shown

FAMILIES = ("tomb", "msg", "mem", "mem_", "hl", "exp", "rel", "meta", "unknown")
COLUMNS = (
    "read",
    "created",
    "existing",
    "merged",
    "duplicate",
    "tombstoned",
    "soft_deleted",
    "flagged",
    "errors",
)

Progress = Callable[[str, int, int], None]


def no_progress(stage: str, done: int, total: int) -> None:
    """The default progress callback: report nothing."""


class BadRecord(ValueError):
    """A record that cannot be imported; `key` names it (rule 8)."""

    def __init__(self, key: str, problem: str):
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}")


class BadDump(Exception):
    """The dump cannot be imported; nothing was written."""


@dataclass
class Report:
    """The final table (rule 9) and every anomaly, one line each."""

    counts: dict = field(default_factory=lambda: {f: dict.fromkeys(COLUMNS, 0) for f in FAMILIES})
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    def add(self, family: str, column: str, n: int = 1) -> None:
        self.counts[family][column] += n

    def note(self, text: str) -> None:
        self.notes.append(text)

    def created(self, family: str, key: str, *, deleted, flagged: str = "") -> None:
        """A planned record: created, and soft-deleted or flagged when it is."""
        counts = self.counts[family]
        counts["created"] += 1
        if deleted:
            counts["soft_deleted"] += 1
        if flagged:
            counts["flagged"] += 1
            self.notes.append(gettext("flagged %(key)s: %(flag)s") % {"key": key, "flag": shown(flagged)})

    def rows(self) -> list[tuple[str, dict]]:
        return [(f, c) for f, c in self.counts.items() if any(c.values())]

    def as_dict(self) -> dict:
        totals = dict.fromkeys(COLUMNS, 0)
        for _f, c in self.rows():
            for col in COLUMNS:
                totals[col] += c[col]
        return {
            "dry_run": self.dry_run,
            "families": dict(self.rows()),
            "total": totals,
            "notes": self.notes,
        }

    def table(self) -> str:
        head = ["family", *COLUMNS]
        body = [[f, *(str(c[col]) for col in COLUMNS)] for f, c in self.rows()]
        totals = self.as_dict()["total"]
        body.append(["total", *(str(totals[col]) for col in COLUMNS)])
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

        def line(r):
            cells = zip(r, widths, strict=True)
            return "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(cells))

        return "\n".join([line(head), line(["-" * w for w in widths]), *(line(r) for r in body)])
