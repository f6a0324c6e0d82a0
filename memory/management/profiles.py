"""How management commands name a profile: (user, key); the user defaults to the first superuser."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from memory.models import Profile


def resolve_user(username: str | None):
    """The named user, or the first superuser (by id) when no name is given."""
    User = get_user_model()
    if username:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        return user
    user = User.objects.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        raise CommandError("no superuser exists; pass --user USERNAME")
    return user


def resolve_profile(username: str | None, key: str) -> Profile:
    user = resolve_user(username)
    profile = Profile.objects.filter(user=user, key=key).first()
    if profile is None:
        raise CommandError(f"user {user.username!r} has no profile {key!r}")
    return profile
