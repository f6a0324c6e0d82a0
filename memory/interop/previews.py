"""The data page's pending imports (SPEC S4, issue 16 point 2): the uploaded export is kept,
byte for byte, under `imports/<token>.json` in the default storage between the dry-run
preview and its apply. It is removed on apply, on cancel, when the same person previews
another file, and by the server's housekeeping once older than PREVIOUSLY_IMPORT_PREVIEW_HOURS
(`sweep_previews`) — no preview outlives that. Both the preview and the apply read it as it
streams from the storage (`preview_file`, memory/interop/json_stream.py)."""

import re
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.files.storage import default_storage
from django.utils import timezone

from memory.interop.json_stream import ExportFile

FOLDER = "imports"
TOKEN_RE = re.compile(r"[0-9a-f]{32}")


def save_preview(upload) -> str:
    """Store the upload (streamed from Django's temp file) under a new token."""
    token = secrets.token_hex(16)
    default_storage.save(_path(token), upload)
    return token


def _path(token: str) -> str:
    if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
        raise ValueError(f"not a preview token: {token!r:.40}")
    return f"{FOLDER}/{token}.json"


def preview_exists(token: str) -> bool:
    return default_storage.exists(_path(token))


def preview_file(token: str) -> ExportFile:
    """The stored upload, read as it streams from the storage in each pass (never whole)."""
    path = _path(token)
    return ExportFile(lambda: default_storage.open(path, "rb"))


def drop_preview(token: str | None) -> None:
    if token and TOKEN_RE.fullmatch(str(token)):
        default_storage.delete(_path(token))


def sweep_previews(now=None) -> int:
    """Remove every pending import older than PREVIOUSLY_IMPORT_PREVIEW_HOURS; how many."""
    if not default_storage.exists(FOLDER):
        return 0
    cutoff = (now or timezone.now()) - timedelta(hours=settings.PREVIOUSLY_IMPORT_PREVIEW_HOURS)
    removed = 0
    for name in default_storage.listdir(FOLDER)[1]:
        path = f"{FOLDER}/{name}"
        try:
            if default_storage.get_modified_time(path) < cutoff:
                default_storage.delete(path)
                removed += 1
        except FileNotFoundError:
            continue  # applied or cancelled meanwhile
    return removed


def preview_path(token: str) -> str:
    """The stored upload's path on this machine (a history import opens it as a zip, which needs
    to seek): the default storage must be a file system one (FileSystemStorage, the default)."""
    return default_storage.path(_path(token))
