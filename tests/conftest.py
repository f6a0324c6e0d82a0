import pytest


@pytest.fixture
def user(db, django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def profile(user):
    from tests.factories import ProfileFactory

    return ProfileFactory(user=user, key="owner")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # PBKDF2 costs ~0.3 s a user; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
