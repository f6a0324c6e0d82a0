"""The password hash of the servers the tests start in processes of their own (the browser tests'
forked live servers, the hostile suite's `previously.server`), which the suite's MD5 setting
(tests/conftest.py) does not reach."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2(PBKDF2PasswordHasher):
    """Django's PBKDF2 under its own name (so production's hasher reads its hashes, and the other
    way round) at few iterations. With the default hashers every sign-in cost a server about
    0.6-0.9 s of CPU: a stored hash of fewer iterations than the default is re-made at the default
    on the first sign-in (must_update), and checked at it ever after; an unknown name is hashed at
    it too (issue 25 point 4)."""

    iterations = 1000
