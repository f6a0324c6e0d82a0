"""Bring your history from the data page (SPEC H1, issue 27 point 6): upload, preview, apply
in the background with progress, then the result.

A SillyTavern character card (SPEC H2, issue 27 point 5: a PNG with a `chara`/`ccv3` chunk, or
the card's JSON) is taken by the same upload, recognised as `import_history` recognises it
(`looks_like_card`, or the format "card"), and goes through the one entry point the command
and the companions page use, `import_character_card`: its dry run is the preview (which
companion it makes or updates, and what changes), its apply is short (one card, bounded by
PREVIOUSLY_IMAGE_MAX_BYTES) and runs in the request, and the result links to the companion's
settings page. Without a companion key the card makes a companion, or updates the one the same
card made before; a chat history without one goes to the current companion.

The upload is kept like the full import's (memory/interop/previews.py: `imports/<token>.json`,
removed on apply, cancel, a new upload, or after PREVIOUSLY_IMPORT_PREVIEW_HOURS). The apply
runs as a task (`apply_history`), which writes its progress beside the upload
(`imports/<token>.progress.json`); the progress page polls it with htmx, and once done offers
the companion settings page's catch-up section (H3: its estimate and its button). The session
knows the one pending and the one running import, so nobody else's token is ever read (P2).
"""

from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.tasks import task
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from memory.interop.character_card import CardRefused, import_character_card, looks_like_card
from memory.interop.history import Refused, Report
from memory.interop.history.detect import APP_NAMES
from memory.interop.history.plan import Stage
from memory.interop.history.shapes import APPS
from memory.interop.previews import (
    drop_preview,
    preview_exists,
    preview_path,
    save_preview,
)
from memory.models import Profile
from memory.models.archive import PROFILE_KEY_RE
from previously import child
from previously.agent import catch_up
from previously.pages.current_profile import current_profile
from previously.pages.data import progress
from previously.pages.data.history_run import preview_report, run_apply

PENDING = "history_import_pending"
RUNNING = "history_import_running"
SHOWN = 50  # conversations listed on the preview (the totals count them all)
CARD = "card"  # the format a character card is (as `import_history --format card`)


def _context(request, **extra) -> dict:
    profiles = Profile.objects.for_user(request.user)
    return {"profiles": profiles, "current": current_profile(request), "formats": [(a, APP_NAMES[a]) for a in APPS],
            **extra}


@login_required
def history_page(request):
    return render(request, "data/history.html", _context(request))


@login_required
@require_POST
def history_preview(request):
    upload = request.FILES.get("history")
    if upload is None:
        return _error(request, _("Choose an export file to upload."))
    limit = settings.PREVIOUSLY_MAX_IMPORT_BYTES
    if upload.size > limit:
        return _error(request, _("That file is %(size)s bytes; the limit is %(limit)s bytes (PREVIOUSLY_MAX_IMPORT_BYTES).")
                      % {"size": f"{upload.size:,}", "limit": f"{limit:,}"})
    asked = (request.POST.get("profile") or "").strip()
    if asked and not PROFILE_KEY_RE.fullmatch(asked):
        return _error(request, _("A companion's key is 1-32 characters of a-z, 0-9, '_' or '-'."))
    fmt = request.POST.get("format") or "auto"
    if fmt not in ("auto", CARD, *APPS):
        fmt = "auto"
    drop_preview((request.session.pop(PENDING, None) or {}).get("token"))
    token = save_preview(upload, uploader=request.user, target=request.user, kind="history")
    name = Path(upload.name or "upload").name[:120]
    if fmt == CARD or (fmt == "auto" and looks_like_card(preview_path(token))):
        return _card_preview(request, token, name, asked or None)
    key = asked or current_profile(request).key
    try:
        report = _previewed(request, token, name, key, fmt)
    except Refused as exc:
        drop_preview(token)
        return _error(request, _("This file cannot be imported; nothing was written. %(reason)s") % {"reason": exc})
    request.session[PENDING] = {"token": token, "profile": key, "format": report.app, "name": name}
    return render(request, "data/history.html", _context(
        request, preview=report, total=report.total(), token=token, shown=report.conversations[:SHOWN],
        app_name=APP_NAMES[report.app],
    ))


def _previewed(request, token: str, name: str, key: str, fmt: str) -> Report:
    """`preview_report`, beside the server in a child process (`manage.py history_preview`,
    previously/child.py) so reading a big file never holds the GIL other people's pages wait
    for; elsewhere (a test), here. The child hands back the report, or its refusal."""
    if not child.beside_server():
        return preview_report(token, request.user, name, key, fmt)
    try:
        answer = child.ask("history_preview", {"token": token, "user_id": request.user.pk, "name": name, "key": key,
                                               "fmt": fmt})
    except child.Ended as exc:
        raise Refused(name, str(exc)) from exc
    if "refused" in answer:
        raise Refused(**answer["refused"])
    return answer["report"]


def _card_preview(request, token: str, name: str, key: str | None):
    """A character card's dry run: which companion it makes or updates, and what changes (H2).
    A file that is no card we take is refused as the command refuses it, naming the file and
    the problem; the upload is dropped and nothing is written."""
    try:
        report = import_character_card(preview_path(token), user=request.user, profile_key=key, dry_run=True, name=name)
    except CardRefused as exc:
        drop_preview(token)
        return _error(request, str(exc))
    request.session[PENDING] = {"token": token, "profile": key, "format": CARD, "name": name}
    updated = Profile.objects.filter(user=request.user, key=report.profile_key).first()
    return render(request, "data/history.html", _context(request, card=report, card_target=updated, token=token))


@login_required
@require_POST
def history_apply(request):
    pending = request.session.get(PENDING) or {}
    if not pending or pending.get("token") != request.POST.get("token"):
        return redirect("data_history")
    del request.session[PENDING]
    if "cancel" in request.POST:
        drop_preview(pending["token"])
        return redirect("data_history")
    if not preview_exists(pending["token"]):
        return _error(request, _("That preview has expired; upload the file again."))
    if pending.get("format") == CARD:
        return _card_apply(request, pending)
    token = pending["token"]
    progress.write(token, {"state": "queued", "done": 0, "total": 0})
    request.session[RUNNING] = token
    apply_history.enqueue(token, request.user.pk, pending["profile"], pending["format"], pending["name"])
    return redirect("data_history_progress", token=token)


@login_required
def history_progress(request, token: str):
    if request.session.get(RUNNING) != token:
        raise Http404("no such import")
    state = progress.read(token) or {"state": "gone"}
    template = "data/history.html#progress" if request.headers.get("HX-Request") else "data/history.html"
    extra = {}
    if state.get("state") == "done":
        # The next step: the card catches up (H3). The settings page's section, its estimate and
        # its button (profile_catch_up), shown here too.
        target = Profile.objects.filter(user=request.user, key=state.get("profile")).first()
        if target is not None:
            extra = {"target": target, "catch_up_plan": catch_up.plan(target), "catch_up": catch_up.latest(target)}
    return render(request, template, _context(request, progress=state, token=token,
                                              stage=Stage.LABELS.get(state.get("stage"), ""), **extra))


def _card_apply(request, pending: dict):
    """Make or update the companion from the previewed card, in the request (one card, bounded
    by PREVIOUSLY_IMAGE_MAX_BYTES); the upload goes whatever happens. Only the person's own
    companions are looked at (`import_character_card` takes their user, P2)."""
    try:
        report = import_character_card(preview_path(pending["token"]), user=request.user,
                                       profile_key=pending.get("profile"), name=pending.get("name") or "")
    except CardRefused as exc:
        return _error(request, str(exc))
    finally:
        drop_preview(pending["token"])
    return render(request, "data/history.html", _context(request, card_done=report))


def _error(request, message: str):
    return render(request, "data/history.html", _context(request, error=message), status=400)


@task()
def apply_history(token: str, user_id: int, profile_key: str, fmt: str, name: str) -> str:
    """Apply a previewed history import, writing its progress for the page; returns its state.
    Where tasks run on the server's own threads (the embedded default), the import runs in a
    child process (`manage.py history_apply`, previously/child.py), so its parsing never holds
    the GIL another person's page and socket wait for; elsewhere (a task worker, a test), here."""
    if not child.beside_server():
        return run_apply(token, user_id, profile_key, fmt, name)
    # The child says how it ended (not the progress file, which anyone may have written since).
    try:
        return child.ask("history_apply", {"token": token, "user_id": user_id, "profile_key": profile_key,
                                           "fmt": fmt, "name": name})["state"]
    except child.Ended as exc:  # it died before it could say (killed, out of memory, a broken start)
        drop_preview(token)
        progress.write(token, {"state": "stopped", "error": str(exc)})
        return "stopped"
