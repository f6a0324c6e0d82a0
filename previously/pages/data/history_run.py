"""What a history import does in the process it runs in (SPEC H1, issue 27 point 6): the
preview and the apply of an upload, which the data page's views (previously/pages/data/history.py)
run here or in a child process (`manage.py history_preview`, `history_apply`, previously/child.py).

Apart from the views, so a child imports only the importer: the views' module imports the
agent's catch-up, and with it the model client (the `openai` SDK), about 0.7 s of every child's
start (issue 25 point 4)."""

import logging

from django.contrib.auth import get_user_model
from django.db import DatabaseError
from django.shortcuts import get_object_or_404

from memory.interop.history import HistoryImport, Refused, Report, apply
from memory.interop.previews import drop_preview, preview_path
from previously.pages.data import progress

log = logging.getLogger(__name__)


def preview_report(token: str, user, name: str, key: str, fmt: str) -> Report:
    """The upload's preview: the whole file read and checked, nothing written; raises Refused."""
    with HistoryImport(preview_path(token), user=user, name=name, profile_key=key, fmt=fmt) as imp:
        return imp.preview()


def run_apply(token: str, user_id: int, profile_key: str, fmt: str, name: str) -> str:
    """The import itself, in this process (`apply_history` decides where it runs)."""
    user = get_object_or_404(get_user_model(), pk=user_id)
    try:
        with HistoryImport(preview_path(token), user=user, name=name, profile_key=profile_key, fmt=fmt) as imp:
            report = apply(imp, progress=progress.reporter(token))
        t = report.total()
        state = {"state": "done", "written": report.written, "slices": report.slices, "lines": t.lines,
                 "alternatives": t.alternatives, "already": t.already, "tombstoned": t.tombstoned,
                 "experiences": report.experiences_new, "profile": report.profile,
                 "conversations": len(report.conversations)}
    except Refused as exc:
        state = {"state": "refused", "error": str(exc)}
    except DatabaseError as exc:
        state = {"state": "stopped", "error": f"{exc.__class__.__name__}: {exc}"}
    except Exception as exc:  # the page must learn it stopped, whatever stopped it
        log.exception("history import %s stopped", token)
        state = {"state": "stopped", "error": exc.__class__.__name__}
    finally:
        drop_preview(token)
    progress.write(token, state)
    return state["state"]
