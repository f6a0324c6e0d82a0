"""What a delete-for-good confirmation shows (SPEC D1, D6, D7, O6), shared by the message and the
conversation confirmations: the refs of `memory.deletion` grouped for templates/forget_refs.html,
and what the backups still hold."""

from datetime import datetime

from django.utils import timezone
from django.utils.dateformat import format as format_date
from django.utils.translation import ngettext

from memory import backups


def backup_note(made_at: datetime | None) -> str:
    """O6, said truthfully: how many kept backups hold a record made at `made_at`, and when the
    last of them is removed; empty when none holds it."""
    if made_at is None:
        return ""
    held = backups.holding(made_at)
    if not held:
        return ""
    until = max(b.expires_at for b in held)
    return ngettext(
        "%(n)d backup taken since still holds it; it is removed on %(date)s. Restoring it would delete this again.",
        "%(n)d backups taken since still hold it; the last is removed on %(date)s. Restoring one would delete this again.",
        len(held),
    ) % {"n": len(held), "date": format_date(timezone.localtime(until), "Y-m-d")}


def refs_context(refs: list[dict] | None, *, made_at: datetime | None = None) -> dict:
    refs = refs or []
    return {
        "refs": refs,
        "has_replies": any(r["kind"] == "reply" for r in refs),
        "has_card_lines": any(r["kind"] == "card" for r in refs),
        "backup_note": backup_note(made_at) if refs else "",
    }
