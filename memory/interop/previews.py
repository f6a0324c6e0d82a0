"""The data page's pending imports (SPEC S4, issue 16 point 2): the uploaded export is kept,
byte for byte, under `imports/<token>.json` in the default storage between the dry-run
preview and its apply. It is removed on apply, on cancel, when the same person previews
another file, and by the server's housekeeping once older than PREVIOUSLY_IMPORT_PREVIEW_HOURS
(`sweep_previews`) — no preview outlives that."""

import json
import re
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.files.storage import default_storage
from django.utils import timezone

FOLDER = "imports"
TOKEN_RE = re.compile(r"[0-9a-f]{32}")


class BadFile(Exception):
    """The upload is not JSON we are willing to parse; the message says why."""


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


def read_preview(token: str) -> bytes:
    with default_storage.open(_path(token)) as fh:
        return fh.read()


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


def parse_export(raw: bytes) -> dict:
    """The export's JSON, bounded before it is built: at most PREVIOUSLY_IMPORT_MAX_OBJECTS
    objects and arrays (counted from the bytes, an upper bound, before parsing) and no deeper
    than the parser's recursion limit; BadFile with a clear reason otherwise."""
    limit = settings.PREVIOUSLY_IMPORT_MAX_OBJECTS
    containers = raw.count(b"{") + raw.count(b"[")
    if containers > limit:
        raise BadFile(f"That file holds up to {containers:,} JSON objects and arrays; the limit is {limit:,}"
                      " (PREVIOUSLY_IMPORT_MAX_OBJECTS).")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadFile("That file is not UTF-8 text, so not a JSON export.") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise BadFile("That file is nested too deeply to be an export.") from None
    except json.JSONDecodeError as exc:
        raise BadFile(f"That file is not a JSON export ({exc.msg} at line {exc.lineno}, column {exc.colno}).") from None
