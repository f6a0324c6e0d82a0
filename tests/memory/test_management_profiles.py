"""One user/profile lookup for every command (issue 14): `--user`, else the first superuser."""

import pytest
from django.core.management.base import CommandError

from memory.management.profiles import resolve_profile, resolve_user
from tests.factories import ProfileFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_a_named_user_is_that_user_even_when_superusers_exist():
    UserFactory(username="root", is_superuser=True)
    ann = UserFactory(username="ann")
    assert resolve_user("ann") == ann


def test_no_name_means_the_first_superuser_by_id():
    UserFactory(username="plain")
    first = UserFactory(username="root", is_superuser=True)
    UserFactory(username="later", is_superuser=True)
    assert resolve_user(None) == first


def test_an_unknown_user_or_no_superuser_is_a_command_error_with_the_asked_exit_status():
    with pytest.raises(CommandError, match="no superuser exists; pass --user") as no_admin:
        resolve_user(None, returncode=2)
    assert no_admin.value.returncode == 2
    with pytest.raises(CommandError, match="no user 'ghost'") as unknown:
        resolve_user("ghost")
    assert unknown.value.returncode == 1


def test_a_profile_is_looked_up_by_key_under_the_resolved_user():
    owner = ProfileFactory(user=UserFactory(username="root", is_superuser=True), key="owner")
    ProfileFactory(user=UserFactory(username="ann"), key="owner")
    assert resolve_profile(None, "owner") == owner
    with pytest.raises(CommandError, match="user 'root' has no profile 'nobody'"):
        resolve_profile(None, "nobody")
