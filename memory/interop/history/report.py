"""What an import found and did (SPEC H1, issue 27 point 6): per conversation and in total.

The same report is the preview (`--dry-run`, the data page's preview) and the apply's
result; `as_json()` is what `--report-json` writes and the data page shows.
"""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from memory.interop.history.shapes import Skip


@dataclass
class ConversationReport:
    key: str
    title: str
    record: str
    lines: int = 0  # visible lines (image messages included)
    alternatives: int = 0  # branches kept as hidden alternatives
    skipped: Counter = field(default_factory=Counter)
    images_found: int = 0
    images_missing: int = 0
    first: datetime | None = None
    last: datetime | None = None
    already: int = 0  # lines and alternatives already archived (same mid)
    tombstoned: int = 0  # kept out: the person deleted them for good (D2)
    new: int = 0  # rows this import writes (or wrote)

    @property
    def skipped_labelled(self) -> list[tuple[str, int]]:
        """(the kind in the active language, count), for pages (a template would read a
        Counter's `.items` as a key)."""
        return [(str(Skip.LABELS.get(kind, kind)), n) for kind, n in sorted(self.skipped.items()) if n]

    def as_json(self) -> dict:
        return {
            "key": self.key, "title": self.title, "record": self.record, "lines": self.lines,
            "alternatives": self.alternatives, "skipped": dict(sorted(self.skipped.items())),
            "images_found": self.images_found, "images_missing": self.images_missing,
            "first": self.first.isoformat() if self.first else None,
            "last": self.last.isoformat() if self.last else None,
            "already_archived": self.already, "kept_out_by_tombstones": self.tombstoned, "new": self.new,
        }


@dataclass
class Report:
    file: str
    app: str
    profile: str  # the companion's key
    profile_exists: bool
    dry_run: bool = True
    conversations: list[ConversationReport] = field(default_factory=list)
    experiences_new: int = 0  # candidate experiences from the app's memory / custom instructions
    experiences_already: int = 0
    written: int = 0  # message rows written by the apply
    slices: int = 0  # slices the apply opened

    def total(self) -> ConversationReport:
        t = ConversationReport(key="", title="", record="")
        for c in self.conversations:
            t.lines += c.lines
            t.alternatives += c.alternatives
            t.skipped.update(c.skipped)
            t.images_found += c.images_found
            t.images_missing += c.images_missing
            t.already += c.already
            t.tombstoned += c.tombstoned
            t.new += c.new
            if c.first and (t.first is None or c.first < t.first):
                t.first = c.first
            if c.last and (t.last is None or c.last > t.last):
                t.last = c.last
        return t

    def as_json(self) -> dict:
        total = self.total().as_json()
        for k in ("key", "title", "record"):
            total.pop(k)
        return {
            "file": self.file, "format": self.app, "companion": self.profile,
            "companion_exists": self.profile_exists, "dry_run": self.dry_run,
            "conversations": len(self.conversations), "total": total,
            "experiences": {"new": self.experiences_new, "already": self.experiences_already},
            "written": self.written, "slices_opened": self.slices,
            "per_conversation": [c.as_json() for c in self.conversations],
        }
