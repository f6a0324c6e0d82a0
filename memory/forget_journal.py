"""The forget journal (SPEC O6): every delete for good, written outside the database.

A backup holds what was stored when it was taken; a restore must not bring back what the person
deleted after that. Each hard delete appends one JSON line per tombstone (kind, record id,
content hash, profile id and key, time) — never text — to `forget-journal.jsonl` in the backup
folder, once its transaction has committed. A restore re-applies every entry newer than the
backup (`memory.backups.restore`). Entries older than every backup kept are dropped when old
backups are (`prune`); the first line records since when the journal is complete.
"""

import json
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

# Kinds beyond the tombstone kinds: a whole companion, a whole account, and a line a delete took
# off the card (its key: the section and a hash of the line, never its text).
PROFILE = "profile"
ACCOUNT = "account"
CARD_LINE = "card_line"

_write_lock = threading.Lock()


def backup_dir() -> Path:
    """Where backups and the journal live (PREVIOUSLY_BACKUP_DIR, default var/backups)."""
    folder = Path(settings.PREVIOUSLY_BACKUP_DIR or Path(settings.VAR_DIR) / "backups")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def journal_path() -> Path:
    return backup_dir() / "forget-journal.jsonl"


@dataclass(frozen=True)
class Entry:
    """One forgotten record: ids and a hash, never its text."""

    at: str  # ISO 8601, UTC
    kind: str  # a Tombstone kind, PROFILE or ACCOUNT
    object_id: str
    profile_id: int | None = None
    profile_key: str = ""
    user_id: int | None = None
    content_hash: str = ""

    @property
    def time(self) -> datetime:
        return datetime.fromisoformat(self.at)


def record(entries: Iterable[Entry]) -> None:
    """Append `entries` once the current transaction commits (at once outside one)."""
    lines = [json.dumps(asdict(e), ensure_ascii=True, separators=(",", ":")) for e in entries]
    if lines:
        transaction.on_commit(lambda: _append(lines))


def entry(kind: str, object_id: str, *, profile_id=None, profile_key="", user_id=None,
          content_hash="", at: datetime | None = None) -> Entry:
    when = (at or timezone.now()).astimezone(UTC)
    return Entry(at=when.isoformat(), kind=kind, object_id=str(object_id), profile_id=profile_id,
                 profile_key=profile_key, user_id=user_id, content_hash=content_hash or "")


def start() -> None:
    """Begin the journal (its first line says since when it is complete) unless it exists;
    every backup does this before it copies, so the journal covers every backup kept."""
    _append([])


def _append(lines: list[str]) -> None:
    path = journal_path()
    with _write_lock:
        new = not path.exists()
        if not lines and not new:
            return
        with open(path, "a", encoding="ascii") as journal:
            if new:
                journal.write(json.dumps({"since": timezone.now().astimezone(UTC).isoformat()}) + "\n")
            if lines:
                journal.write("\n".join(lines) + "\n")
            journal.flush()
            os.fsync(journal.fileno())


def since() -> datetime | None:
    """The time from which the journal is complete (None: no journal yet, nothing forgotten)."""
    path = journal_path()
    if not path.exists():
        return None
    with open(path, encoding="ascii") as journal:
        head = journal.readline()
    try:
        return datetime.fromisoformat(json.loads(head)["since"])
    except (ValueError, KeyError, TypeError):
        return None


def entries(*, after: datetime | None = None) -> Iterator[Entry]:
    """The journal's entries in order, those at or after `after` when given."""
    path = journal_path()
    if not path.exists():
        return
    with open(path, encoding="ascii") as journal:
        for line in journal:
            data = json.loads(line)
            if "since" in data:
                continue
            item = Entry(**data)
            if after is None or item.time >= after:
                yield item


def prune(*, before: datetime) -> int:
    """Drop entries older than `before` (no backup kept is older); returns how many went."""
    path = journal_path()
    if not path.exists():
        return 0
    with _write_lock:
        kept = [e for e in entries() if e.time >= before]
        with open(path, encoding="ascii") as journal:
            total = sum(1 for line in journal if '"since"' not in line)
        start = max(since() or before, before)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="ascii") as out:
            out.write(json.dumps({"since": start.astimezone(UTC).isoformat()}) + "\n")
            for e in kept:
                out.write(json.dumps(asdict(e), ensure_ascii=True, separators=(",", ":")) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    return total - len(kept)
