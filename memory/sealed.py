"""Secrets at rest (SPEC O4): an API key is sealed with Fernet (AES-128-CBC + HMAC-SHA256, the
`cryptography` package) under a key derived from PREVIOUSLY_CONNECTION_SECRET, or Django's
SECRET_KEY when that is unset. Changing that secret makes stored keys unreadable: they must be
entered again (the connections page says so)."""

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class Unreadable(Exception):
    """A sealed value that the current secret cannot open."""


def _fernet() -> Fernet:
    secret = (settings.PREVIOUSLY_CONNECTION_SECRET or settings.SECRET_KEY).encode()
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"previously-connections", info=b"api-key").derive(secret)
    return Fernet(base64.urlsafe_b64encode(key))


def seal(text: str) -> str:
    return _fernet().encrypt(text.encode()).decode() if text else ""


def unseal(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as error:
        raise Unreadable("this key was sealed under another secret; enter it again") from error
