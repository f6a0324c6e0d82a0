"""The data page's pending imports (SPEC S4, issue 16 point 2, issue 24 point 7): the uploaded
export is kept, byte for byte, under `imports/<token>.json` in the default storage between the
dry-run preview and its apply. A token names the person who uploaded it and the account it goes
into (staff may import into another's), so pending imports are per person, not per session: at
most one each — a new preview removes the person's earlier one, from whichever session — and
the person's are removed at logout (previously.pages.data), on a finished apply, on cancel, and by
the server's housekeeping once older than PREVIOUSLY_IMPORT_PREVIEW_HOURS (`sweep_previews`).
An apply that a database error stopped keeps its preview, so applying it again finishes it
(issue 25 point 6). Both the preview and the apply read it as it streams from the storage
(`preview_file`, memory/interop/json_stream.py)."""

import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from memory.interop.full.read import ExportArchive, open_export_path
from memory.interop.full.report import BadExport
from memory.interop.json_stream import ExportFile

FOLDER = "imports"
CHECKED = f"{FOLDER}-checked"  # an empty file per pending import whose preview checked it whole
# u<uploader>-t<target>-[<kind>-]<hex>: the kind tells a history import ("history") or a
# character card ("card") from the data page's full import (no kind), one pending each.
TOKEN_RE = re.compile(r"u([0-9]+)-t([0-9]+)-(?:([a-z]+)-)?[0-9a-f]{32}")


@dataclass(frozen=True)
class Pending:
    """A person's pending import: its token and the account it goes into."""

    token: str
    target_id: int


def save_preview(upload, *, uploader, target, kind: str = "") -> str:
    """Store the upload (streamed from Django's temp file) under a new token; the uploader's
    earlier pending import of the same kind, if any, is removed (one per person and kind)."""
    for token in _tokens(uploader, kind):
        drop_preview(token)
    token = f"u{uploader.pk}-t{target.pk}-{kind + '-' if kind else ''}{secrets.token_hex(16)}"
    default_storage.save(_path(token), upload)
    return token


def _path(token: str) -> str:
    if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
        raise ValueError(f"not a preview token: {token!r:.40}")
    return f"{FOLDER}/{token}.json"


def _tokens(uploader, kind: str | None = None) -> list[str]:
    """The uploader's pending tokens, of one kind ("" the full import) or of all (None)."""
    if uploader is None or uploader.pk is None or not default_storage.exists(FOLDER):
        return []
    prefix = f"u{uploader.pk}-"
    found = []
    for name in default_storage.listdir(FOLDER)[1]:
        token = name.removesuffix(".json")
        match = TOKEN_RE.fullmatch(token)
        if name.startswith(prefix) and match and (kind is None or (match.group(3) or "") == kind):
            found.append(token)
    return found


def pending_preview(uploader) -> Pending | None:
    """The person's pending import, or None (never uploaded, applied, cancelled or swept)."""
    for token in _tokens(uploader, ""):
        return Pending(token=token, target_id=int(TOKEN_RE.fullmatch(token).group(2)))
    return None


def preview_file(token: str) -> ExportFile:
    """The stored upload, read as it streams from the storage in each pass (never whole);
    `checked` once its preview has checked every record (`mark_checked`)."""
    path = _path(token)
    return ExportFile(lambda: default_storage.open(path, "rb"), checked=default_storage.exists(_checked_path(token)))


def mark_checked(token: str) -> None:
    """Issue 24 point 6: the preview checked every record of this stored file (which nothing
    changes), so its apply need not check them again: it reads the file once, to write."""
    default_storage.save(_checked_path(token), ContentFile(b""))


def _checked_path(token: str) -> str:
    _path(token)  # a token, or ValueError
    return f"{CHECKED}/{token}"


def preview_export(token: str) -> ExportArchive:
    """The stored upload as an export to import: a JSON one streamed from the storage, a zip
    one (issue 28 point 4, an export with images) opened from the storage's path through the
    zip checks (memory.interop.full.read.open_export_path). Close it (it is a context manager)."""
    path = _path(token)
    with default_storage.open(path, "rb") as fh:
        is_zip = fh.read(4) == b"PK\x03\x04"
    if not is_zip:
        return ExportArchive(json=preview_file(token))
    try:
        local = default_storage.path(path)
    except NotImplementedError:
        raise BadExport("a zip export needs file-system storage here (STORAGES['default']); import it with"
                        " `manage.py import_full`. Nothing was written.") from None
    return open_export_path(local, name="the uploaded zip", checked=default_storage.exists(_checked_path(token)))


def preview_exists(token: str) -> bool:
    return bool(token) and bool(TOKEN_RE.fullmatch(str(token))) and default_storage.exists(_path(token))


def drop_preview(token: str | None) -> None:
    if token and TOKEN_RE.fullmatch(str(token)):
        default_storage.delete(_checked_path(token))
        default_storage.delete(_path(token))


def drop_previews(uploader) -> int:
    """Remove every pending import of this person (a new preview, logout); how many."""
    tokens = _tokens(uploader)
    for token in tokens:
        drop_preview(token)
    return len(tokens)


def sweep_previews(now=None) -> int:
    """Remove every pending import older than PREVIOUSLY_IMPORT_PREVIEW_HOURS; how many."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.PREVIOUSLY_IMPORT_PREVIEW_HOURS)
    removed = 0
    for folder in (FOLDER, CHECKED):
        if not default_storage.exists(folder):
            continue
        for name in default_storage.listdir(folder)[1]:
            path = f"{folder}/{name}"
            try:
                if default_storage.get_modified_time(path) < cutoff:
                    default_storage.delete(path)
                    removed += folder == FOLDER
            except FileNotFoundError:
                continue  # applied or cancelled meanwhile
    return removed


def preview_path(token: str) -> str:
    """The stored upload's path on this machine (a history import opens it as a zip, which needs
    to seek): the default storage must be a file system one (FileSystemStorage, the default)."""
    return default_storage.path(_path(token))
