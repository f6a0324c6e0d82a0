"""How management commands name a user and a profile: `--user`, else the first superuser; (user, key)."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from memory.models import Profile


def resolve_user(username: str | None, *, returncode: int = 1):
    """The `--user` account, or the first superuser (by id) when no name is given.

    CommandError (exit status `returncode`) with a message a person can act on otherwise."""
    User = get_user_model()
    if username:
        user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"no user {username!r}; create it first or pass another --user", returncode=returncode)
        return user
    user = User.objects.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        raise CommandError("no superuser exists; pass --user USERNAME or create one", returncode=returncode)
    return user


def resolve_profile(username: str | None, key: str, *, returncode: int = 1) -> Profile:
    """The profile `key` of the `--user` account (or of the first superuser)."""
    user = resolve_user(username, returncode=returncode)
    profile = Profile.objects.filter(user=user, key=key).first()
    if profile is None:
        raise CommandError(f"user {user.get_username()!r} has no profile {key!r}", returncode=returncode)
    return profile
