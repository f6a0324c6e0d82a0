"""The full import's report and refusals (SPEC X2, X4)."""

from collections import defaultdict
from dataclasses import dataclass, field

KINDS = ("tombstones", "slices", "evolution_runs", "slice_log", "messages", "legacy_fragments", "highlights",
         "experiences", "relations", "legacy_meta", "card", "card_snapshots", "favourites", "lore_entries",
         "companion_card", "proactive_sends")
COLUMNS = ("read", "created", "existing", "tombstoned")


class BadExport(Exception):
    """The file is not an export we can read; nothing was written."""


class ImportInterrupted(Exception):
    """A database error stopped the apply part-way; the message says what was kept and that
    running the same import again finishes it (X2: what exists is skipped)."""


@dataclass
class FullReport:
    counts: dict = field(default_factory=lambda: {k: dict.fromkeys(COLUMNS, 0) for k in KINDS})
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    def add(self, kind: str, column: str, n: int = 1) -> None:
        self.counts[kind][column] += n

    def as_dict(self) -> dict:
        return {"dry_run": self.dry_run, "kinds": self.counts, "notes": self.notes}

    def rows(self) -> list[list]:
        """One row per kind: the kind, then its COLUMNS counts (the command prints them)."""
        return [[kind, *(c[col] for col in COLUMNS)] for kind, c in self.counts.items()]



def counts_by_kind(report: FullReport) -> dict:
    """kind -> created (the dry-run preview's headline numbers)."""
    out = defaultdict(int)
    for kind, c in report.counts.items():
        out[kind] = c["created"]
    return dict(out)
