"""Backups that keep the forget promise (SPEC O6).

`make_backup` takes a consistent copy while the server runs: on SQLite through the online
backup API in one step (a read transaction: in WAL mode writers go on meanwhile), checked with
`PRAGMA integrity_check` before it counts; on PostgreSQL through `pg_dump` when it is installed.
Each backup is a file in the backup folder named for its start time, with a `.json` beside it
(start time, engine, size, check). `prune` keeps PREVIOUSLY_BACKUP_KEEP_DAYS of them.

`restore` puts a backup back and then re-applies every delete for good made since it was
taken, read from the forget journal (`memory.forget_journal`, outside the database), so
nothing the person deleted comes back. It refuses while a server process holds the server lock
(`memory.server_lock`).
"""

import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from django.utils import timezone

from memory import forget_journal, server_lock
from memory.accounts import delete_account
from memory.deletion import (
    delete_profile,
    forget_card_lines_again,
    hard_delete_message,
    purge_experience,
    purge_highlight,
    purge_relation,
)
from memory.models import (
    Experience,
    Highlight,
    LegacyFragment,
    Message,
    Profile,
    Relation,
    Tombstone,
)

SUFFIX = {"sqlite": ".sqlite3", "postgresql": ".pgdump"}
STAMP = "%Y%m%dT%H%M%S%fZ"


class BackupError(Exception):
    """A backup or restore that could not be done; the message says why and what to do."""


@dataclass(frozen=True)
class Backup:
    path: Path
    started_at: datetime
    engine: str
    bytes: int

    @property
    def expires_at(self) -> datetime:
        return self.started_at + timedelta(days=settings.PREVIOUSLY_BACKUP_KEEP_DAYS)


@dataclass
class RestoreReport:
    backup: Backup
    reapplied: dict[str, int] = field(default_factory=dict)
    journal_since: datetime | None = None

    @property
    def total(self) -> int:
        return sum(self.reapplied.values())


def engine() -> str:
    vendor = connections["default"].vendor
    if vendor not in SUFFIX:
        raise BackupError(f"backups support SQLite and PostgreSQL, not {vendor}")
    return vendor


def _sqlite_path() -> Path:
    return Path(connections["default"].settings_dict["NAME"])


# --- taking one -----------------------------------------------------------------------------


def make_backup(*, now: datetime | None = None) -> Backup:
    """A consistent copy of the database in the backup folder, checked before it counts."""
    kind = engine()
    forget_journal.start()  # before the start time is read: the journal covers this backup
    started = (now or timezone.now()).astimezone(UTC)
    folder = forget_journal.backup_dir()
    final = folder / f"previously-{started.strftime(STAMP)}{SUFFIX[kind]}"
    partial = final.with_name(final.name + ".partial")
    try:
        if kind == "sqlite":
            _sqlite_copy(_sqlite_path(), partial)
            problem = sqlite_problem(partial)
        else:
            _pg_dump(partial)
            problem = _pg_problem(partial)
        if problem:
            raise BackupError(f"the copy failed its check ({problem}); nothing was kept")
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)
    backup = Backup(path=final, started_at=started, engine=kind, bytes=final.stat().st_size)
    _sidecar(final).write_text(json.dumps(
        {"started_at": started.isoformat(), "engine": kind, "bytes": backup.bytes, "check": "ok"}))
    return backup


def _sqlite_copy(source: Path, target: Path) -> None:
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst, pages=-1)  # one step: one read transaction, so one consistent state
    finally:
        dst.close()
        src.close()


def sqlite_problem(path: Path) -> str | None:
    """None when `path` is an SQLite database of this app that passes `integrity_check`."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
            if verdict != "ok":
                return f"integrity_check: {verdict}"
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name='django_migrations'").fetchone():
                return "not a database of this app (no django_migrations table)"
        finally:
            db.close()
    except sqlite3.DatabaseError as error:
        return f"not a readable SQLite database: {error}"
    return None


def _pg_settings() -> tuple[list[str], dict[str, str]]:
    conf = connections["default"].settings_dict
    args = ["--dbname", conf["NAME"]]
    for flag, key in (("--host", "HOST"), ("--port", "PORT"), ("--username", "USER")):
        if conf.get(key):
            args += [flag, str(conf[key])]
    env = dict(os.environ)
    if conf.get("PASSWORD"):
        env["PGPASSWORD"] = conf["PASSWORD"]
    return args, env


# What to run by hand where PostgreSQL's client tools are, as _pg_dump and _pg_restore run them.
_PG_BY_HAND = {"pg_dump": "pg_dump --format=custom {args} --file BACKUP.pgdump",
               "pg_restore": "pg_restore --clean --if-exists --no-owner {args} BACKUP.pgdump"}


def _pg_tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        args, _ = _pg_settings()
        raise BackupError(
            f"{name} is not installed here. Install PostgreSQL's client tools (Debian: postgresql-client) "
            f"or run it where they are: {_PG_BY_HAND[name].format(args=' '.join(args))}")
    return path


def _pg_dump(target: Path) -> None:
    args, env = _pg_settings()
    done = subprocess.run([_pg_tool("pg_dump"), "--format=custom", *args, "--file", str(target)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise BackupError(f"pg_dump failed: {done.stderr.strip()[:500]}")


def _pg_problem(path: Path) -> str | None:
    done = subprocess.run([_pg_tool("pg_restore"), "--list", str(path)], capture_output=True, text=True, check=False)
    if done.returncode:
        return f"pg_restore --list: {done.stderr.strip()[:300]}"
    return None if "django_migrations" in done.stdout else "not a dump of this app"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


# --- the ones kept ----------------------------------------------------------------------------


def read_backup(path: Path) -> Backup:
    """The backup at `path`, from its sidecar or, failing that, its name."""
    path = Path(path)
    if not path.is_file():
        raise BackupError(f"{path}: no such file")
    try:
        meta = json.loads(_sidecar(path).read_text())
        return Backup(path=path, started_at=datetime.fromisoformat(meta["started_at"]),
                      engine=meta["engine"], bytes=path.stat().st_size)
    except (OSError, ValueError, KeyError):
        pass
    stem = path.name.removeprefix("previously-").split(".", 1)[0]
    kind = "postgresql" if path.suffix == ".pgdump" else "sqlite"
    try:
        started = datetime.strptime(stem, STAMP).replace(tzinfo=UTC)
    except ValueError as error:
        raise BackupError(
            f"{path}: cannot tell when this backup was taken (no {_sidecar(path).name}, and the name is not "
            f"previously-{STAMP}{SUFFIX[kind]}), so the deletes made since cannot be re-applied") from error
    return Backup(path=path, started_at=started, engine=kind, bytes=path.stat().st_size)


def backups() -> list[Backup]:
    """Backups in the folder, newest first."""
    found = []
    for path in forget_journal.backup_dir().glob("previously-*"):
        if path.suffix in SUFFIX.values():
            try:
                found.append(read_backup(path))
            except BackupError:
                continue
    return sorted(found, key=lambda b: b.started_at, reverse=True)


def last_backup() -> Backup | None:
    kept = backups()
    return kept[0] if kept else None


def holding(created_at: datetime) -> list[Backup]:
    """The backups kept that hold a record made at `created_at` (taken after it)."""
    return [b for b in backups() if b.started_at >= created_at]


def prune(*, now: datetime | None = None) -> list[Path]:
    """Remove backups older than PREVIOUSLY_BACKUP_KEEP_DAYS, and journal entries older than all
    that remain."""
    now = now or timezone.now()
    removed = []
    for backup in backups():
        if backup.expires_at <= now:
            backup.path.unlink(missing_ok=True)
            _sidecar(backup.path).unlink(missing_ok=True)
            removed.append(backup.path)
    kept = backups()
    forget_journal.prune(before=min((b.started_at for b in kept), default=now))
    return removed


def due(*, now: datetime | None = None) -> bool:
    """A scheduled backup is due: on, and none taken within PREVIOUSLY_BACKUP_HOURS."""
    hours = settings.PREVIOUSLY_BACKUP_HOURS
    if hours <= 0 or settings.PREVIOUSLY_BACKUP_KEEP_DAYS <= 0:
        return False
    last = last_backup()
    return last is None or last.started_at <= (now or timezone.now()) - timedelta(hours=hours)


# --- restoring ------------------------------------------------------------------------------


def check_backup(path: Path) -> Backup:
    """The backup at `path` when it can be restored here; BackupError naming the problem."""
    backup = read_backup(path)
    here = engine()
    if backup.engine != here:
        raise BackupError(f"{path}: a {backup.engine} backup cannot be restored into {here}")
    problem = sqlite_problem(backup.path) if here == "sqlite" else _pg_problem(backup.path)
    if problem:
        raise BackupError(f"{path}: {problem}; nothing was changed")
    return backup


def restore(path: Path) -> RestoreReport:
    """Put the backup at `path` back, then forget again every record deleted since it was taken."""
    backup = check_backup(path)
    try:
        with server_lock.none_running():
            return _restore(backup)
    except server_lock.ServerRunning as error:
        raise BackupError(
            f"a server process is running (it holds {error}). Stop it first (Ctrl+C where `make run` runs, "
            "or stop its service, e.g. `systemctl stop previously`), then restore."
        ) from error


def _restore(backup: Backup) -> RestoreReport:
    connections.close_all()
    if backup.engine == "sqlite":
        _sqlite_restore(backup.path, _sqlite_path())
    else:
        _pg_restore(backup.path)
    report = RestoreReport(backup=backup, journal_since=forget_journal.since())
    # Read whole first: re-applying a delete appends to the journal again.
    for item in list(forget_journal.entries(after=backup.started_at)):
        if _reapply(item):
            report.reapplied[item.kind] = report.reapplied.get(item.kind, 0) + 1
    return report


def _sqlite_restore(source: Path, target: Path) -> None:
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(target, timeout=30)
    try:
        src.backup(dst, pages=-1)
    finally:
        dst.close()
        src.close()


def _pg_restore(source: Path) -> None:
    args, env = _pg_settings()
    done = subprocess.run([_pg_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", *args, str(source)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise BackupError(f"pg_restore failed: {done.stderr.strip()[:500]}")


def _reapply(item: forget_journal.Entry) -> bool:
    """Delete again what `item` names, if the restored database holds it; True when it did."""
    Kind = Tombstone.Kind
    if item.kind == forget_journal.ACCOUNT:
        user = get_user_model().objects.filter(pk=item.user_id).first()
        if user is None:
            return False
        delete_account(user)  # as the person did: login records, invitations' notes, sessions too
        return True
    profile = Profile.objects.filter(pk=item.profile_id).first()
    if profile is None:
        return False
    if item.kind == forget_journal.PROFILE:
        delete_profile(profile)
        return True
    if item.kind == forget_journal.CARD_LINE:
        return forget_card_lines_again(profile.pk, {item.object_id}) > 0
    if item.kind == Kind.MESSAGE:
        message = Message.objects.filter(profile=profile, mid=item.object_id).first()
        if message is None:
            return False
        # The replies the person chose to delete with it have entries of their own.
        hard_delete_message(message, force=True, keep_replies=True)
        return True
    purge = {
        Kind.HIGHLIGHT: (Highlight, "hid", purge_highlight),
        Kind.EXPERIENCE: (Experience, "eid", purge_experience),
        Kind.RELATION: (Relation, "rid", purge_relation),
    }
    if item.kind in purge:
        model, id_field, purge_one = purge[item.kind]
        record = model.objects.filter(profile=profile, **{id_field: item.object_id}).first()
        if record is None:
            return False
        purge_one(record)
        return True
    if item.kind == Kind.FRAGMENT:
        return _reapply_fragment(profile, item)
    return False


def _reapply_fragment(profile: Profile, item: forget_journal.Entry) -> bool:
    """A raw legacy fragment goes only with the line it became, whose entry comes first and
    takes it; it is found here when that entry missed the line: its id was repaired after the
    backup (S5, `repair_message_ids`), so the journal names an id the backup does not know. The
    fragment, under the same key, still joins the line: it goes again with the line, when the
    line's content hash is the one the entry carries, else alone."""
    fragment = LegacyFragment.objects.filter(profile=profile, key=item.object_id).select_related("message").first()
    if fragment is None:
        return False
    line = fragment.message
    if line is not None and item.content_hash and line.content_hash == item.content_hash:
        hard_delete_message(line, force=True, keep_replies=True)  # its fragments with it
    else:
        fragment.delete()
    return True
