"""The progress of an import running in the background (the history import, H1; the full
import's apply, X2, issue 24 point 6): one small JSON file per upload token in the media folder,
written whole (a temporary file, then a rename) by whoever runs the import — a task on the
server's threads, or its child process — and read by the page that polls it.

A state is a dict with `state`: "queued", "running" (with `stage`, `done`, `total`), or one of
ENDED with what the page shows of it."""

import json
import os
import time
from pathlib import Path

from django.core.files.storage import default_storage
from django.http import Http404
from django.utils.translation import gettext

from memory.interop.previews import TOKEN_RE

EVERY = 0.5  # seconds between two progress writes within a stage
ENDED = ("done", "refused", "stopped")
UNDER_WAY = ("queued", "running")
SILENT = 600  # seconds without a word after which an import under way has stopped (its server restarted)


def _file(token: str) -> Path:
    if not TOKEN_RE.fullmatch(str(token)):
        raise Http404("no such import")
    return Path(default_storage.path(f"imports/{token}.progress.json"))


def write(token: str, state: dict) -> None:
    path = _file(token)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, ensure_ascii=False))
    os.replace(tmp, path)


def read(token: str) -> dict | None:
    """The state last written for `token` (None if none). One under way that has said nothing
    for SILENT seconds stopped without saying so (the server running it restarted)."""
    path = _file(token)
    try:
        state, written = json.loads(path.read_text()), path.stat().st_mtime
    except (OSError, ValueError):
        return None
    if state.get("state") in UNDER_WAY and time.time() - written > SILENT:
        return {"state": "stopped", "error": gettext("It gave no news for %(minutes)d minutes.") % {"minutes": SILENT // 60}}
    return state


def reporter(token: str):
    """An import's `progress(stage, done, total)` callback that writes the state "running" for
    `token`: a new stage at once, within a stage at most every EVERY seconds."""
    last = {"at": 0.0, "stage": None}

    def progress(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage != last["stage"] or now - last["at"] >= EVERY:
            last.update(at=now, stage=stage)
            write(token, {"state": "running", "stage": stage, "done": done, "total": total})

    return progress
