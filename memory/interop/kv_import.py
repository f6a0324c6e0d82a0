"""Legacy KV migration (SPEC X3, X4, X5; LEGACY_KV.md rules 1-9): the public entry point.

The phases live in memory.interop.legacy: read -> plan -> write, with the report beside them.
Nothing is written unless everything read well; the plan and the writes share one transaction.
"""


import gc
from contextlib import contextmanager
from typing import IO

from django.contrib.auth import get_user_model
from django.db import transaction

from memory.interop.legacy.plan import fragment_mid, plan_import
from memory.interop.legacy.read import read_records
from memory.interop.legacy.report import BadDump, Progress, Report, no_progress
from memory.interop.legacy.write import write_plan


def import_kv(
    *,
    fh: IO[str],
    user,
    dry_run: bool = False,
    skip_bad: bool = False,
    progress: Progress = no_progress,
) -> Report:
    """Import a legacy KV dump for `user`; all or nothing (X3, X4). Raises BadDump."""
    report = Report(dry_run=dry_run)
    with _gc_paused():
        by_kind = read_records(fh, skip_bad=skip_bad, report=report, progress=progress)
        with transaction.atomic():
            plan = plan_import(by_kind, user=user, report=report, progress=progress)
            del by_kind
            if not dry_run:
                write_plan(plan, progress=progress)
    return report


@contextmanager
def _gc_paused():
    """No cyclic garbage collection while the import holds its records.

    The import keeps a few hundred thousand small containers alive at once, so every full
    collection walks all of them again and again for nothing (they are all live); reference
    counting still frees everything as usual. Restored on the way out.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def default_user(username: str | None):
    """The --user account, or the first superuser; LookupError with an actionable message."""
    User = get_user_model()
    if username:
        try:
            return User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise LookupError(f"no user {username!r}; create it first or pass another --user") from None
    user = User.objects.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        raise LookupError("no superuser to own the imported profiles; pass --user USERNAME or create one")
    return user


__all__ = ["BadDump", "Report", "default_user", "fragment_mid", "import_kv"]
