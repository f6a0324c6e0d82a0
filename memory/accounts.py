"""A person's account as a whole (SPEC O5): the sessions they are signed in with, and deleting
everything of theirs with the D6 guarantees."""

from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from memory import forget_journal
from memory.deletion import delete_profile, reclaim_space
from memory.models import AccountSession, Invitation, Message, Profile

SEEN_EVERY_SECONDS = 60


def seen(*, user, session_key: str, user_agent: str, ip_address: str | None) -> None:
    """Record that `session_key` of `user` was used now (device and address as last seen)."""
    AccountSession.objects.update_or_create(
        session_key=session_key,
        defaults={"user": user, "user_agent": user_agent[:300], "ip_address": ip_address or None,
                  "last_seen": timezone.now()},
    )


def sessions_of(user) -> list[AccountSession]:
    """The person's signed-in sessions that are still valid, newest first (stale records go)."""
    records = list(AccountSession.objects.filter(user=user))
    alive = set(Session.objects.filter(session_key__in=[r.session_key for r in records],
                                       expire_date__gt=timezone.now()).values_list("session_key", flat=True))
    AccountSession.objects.filter(pk__in=[r.pk for r in records if r.session_key not in alive]).delete()
    return [r for r in records if r.session_key in alive]


def end_sessions(user, session_keys) -> list[str]:
    """Sign `user` out of the sessions named (only theirs); returns the keys ended. Their chat
    sockets are closed by the caller (`previously.push.end_sessions`)."""
    keys = list(AccountSession.objects.filter(user=user, session_key__in=list(session_keys))
                .values_list("session_key", flat=True))
    with transaction.atomic():
        Session.objects.filter(session_key__in=keys).delete()
        AccountSession.objects.filter(session_key__in=keys).delete()
    return keys


def account_contents(user) -> dict[str, int]:
    """What deleting the account takes: its companions and their lines."""
    return {"companions": Profile.objects.filter(user=user).count(),
            "lines": Message.objects.filter(profile__user=user).count()}


def delete_account(user) -> list[str]:
    """Delete the person and everything of theirs for good (D6): every companion through
    `delete_profile` (rows, recall index, files), their sessions, the invitations they made, the
    note and name on the one they used (staff's trace of them; it stays used), login records
    naming them, the account itself; the database files keep no copy. A restore re-applies it
    through here too (`memory.backups`). Returns the session keys ended (to close their sockets)."""
    keys = list(AccountSession.objects.filter(user=user).values_list("session_key", flat=True))
    for profile in Profile.objects.filter(user=user):
        delete_profile(profile)
    User = get_user_model()
    with transaction.atomic():
        Session.objects.filter(session_key__in=keys).delete()
        Invitation.objects.filter(created_by=user).delete()
        Invitation.objects.filter(used_by=user).update(note="", used_by=None)
        _forget_login_records(user.get_username())
        forget_journal.record([forget_journal.entry(forget_journal.ACCOUNT, str(user.pk), user_id=user.pk)])
        User.objects.filter(pk=user.pk).delete()
    reclaim_space()
    return keys


def _forget_login_records(username: str) -> None:
    """django-axes keeps the user name of each attempt and login."""
    for model in (AccessAttempt, AccessFailureLog, AccessLog):
        model.objects.filter(username=username).delete()
