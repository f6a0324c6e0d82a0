"""Download a full export and upload one with a dry-run preview (SPEC X1, X2, P2).

The preview and the apply read the whole upload; beside the server they run in a child process
(`manage.py data_import`, previously/child.py), so their parsing neither holds the GIL every other
person's page and socket wait for nor leaves the server process the memory it took (S4, issue 24
point 6). The preview's request waits for its child and shows the report. The apply runs as a task
(`apply_full`) that writes its progress beside the upload (previously/pages/data/progress.py); the
request sends the person to the progress page, which polls it with htmx and shows the report, or
what stopped it and the button that finishes it from the same preview."""

import logging
import tempfile

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.signals import user_logged_out
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.tasks import task
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memory.interop.export import export_full, json_bytes, profiles_for, write_export
from memory.interop.full_import import BadExport, ImportInterrupted, import_full
from memory.interop.previews import (
    drop_preview,
    drop_previews,
    mark_checked,
    pending_preview,
    preview_export,
    save_preview,
)
from memory.models import Profile
from previously import child
from previously.pages.data import progress

RUNNING = "full_import_running"  # the session's key for the token of the apply it follows
NOTES_SHOWN = 50  # an apply's notes kept for its page (data/counts.html shows as many)

log = logging.getLogger(__name__)


@receiver(user_logged_out)
def drop_previews_at_logout(sender, request, user, **kwargs):
    """Issue 24 point 7: a person's pending import goes when they log out."""
    drop_previews(user)


def _target_user(request, username: str | None):
    """The request's user, or (staff only) the named one: nobody else's data otherwise (P2)."""
    if not username or username == request.user.get_username():
        return request.user
    if not request.user.is_staff:
        raise PermissionDenied("Only staff can export or import another user's data.")
    User = get_user_model()
    return get_object_or_404(User, **{User.USERNAME_FIELD: username})


@login_required
def data_page(request):
    target = _target_user(request, request.GET.get("user"))
    return render(request, "data/data.html", {
        "target": target,
        "profiles": Profile.objects.for_user(target),
        "users": get_user_model().objects.order_by("pk") if request.user.is_staff else None,
    })


@login_required
def data_export(request):
    target = _target_user(request, request.GET.get("user"))
    profiles = list(profiles_for(user=target, profile_key=request.GET.get("profile") or None))
    if request.GET.get("profile") and not profiles:
        raise Http404("No such profile.")
    # Issue 28 point 4: the JSON, or a zip of it and the image files when there are images,
    # written to a temporary file; a zip is streamed from there (never its images all in memory).
    export = export_full(profiles=profiles)
    name = f"previously-{target.get_username()}-{request.GET.get('profile') or 'all'}-{timezone.now():%Y%m%d-%H%M}"
    if not export.files:
        response = HttpResponse(json_bytes(export.data), content_type="application/json; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
        return response
    body = tempfile.TemporaryFile()  # noqa: SIM115 - FileResponse closes it once sent
    write_export(export, body)
    body.seek(0)
    return FileResponse(body, as_attachment=True, filename=f"{name}.zip", content_type="application/zip")


@login_required
@require_http_methods(["POST"])
def data_import_preview(request):
    target = _target_user(request, request.POST.get("user"))
    upload = request.FILES.get("export")
    if upload is None:
        return _page_with_error(request, target, _("Choose an export file to upload."))
    limit = settings.PREVIOUSLY_MAX_IMPORT_BYTES
    if upload.size > limit:
        return _page_with_error(
            request, target, _("That file is %(size)s bytes; the limit is %(limit)s bytes (PREVIOUSLY_MAX_IMPORT_BYTES).")
            % {"size": f"{upload.size:,}", "limit": f"{limit:,}"},
        )
    under_way = pending_preview(request.user)
    if under_way is not None and (progress.read(under_way.token) or {}).get("state") in progress.UNDER_WAY:
        # Its apply reads that upload still: a new one would replace it part-way.
        return _page_with_error(request, target, _("An import of yours is under way; upload the next file once it has finished."))
    # S4, issue 24 point 7: one pending preview per person — this one replaces any earlier one.
    token = save_preview(upload, uploader=request.user, target=target)  # as sent, streamed from its temp file
    try:
        report = _previewed(token, target)
    except BadExport as exc:
        drop_preview(token)
        return _page_with_error(request, target, _refused(exc))
    mark_checked(token)  # its apply reads the file once more, to write (issue 24 point 6)
    return render(request, "data/data.html", {
        "target": target, "profiles": Profile.objects.for_user(target), "preview": report, "token": token,
    })


@login_required
@require_POST
def data_import_apply(request):
    pending = pending_preview(request.user)
    if pending is None:
        if request.POST.get("token") and "cancel" not in request.POST:
            return _page_with_error(request, request.user, _("That preview has expired; upload the file again."))
        return redirect("data")
    if pending.token != request.POST.get("token"):
        return redirect("data")
    if "cancel" in request.POST:
        drop_preview(pending.token)
        return redirect("data")
    User = get_user_model()
    target = get_object_or_404(User, pk=pending.target_id)
    _target_user(request, target.get_username())  # re-check: staff rights may have changed
    request.session[RUNNING] = pending.token
    if (progress.read(pending.token) or {}).get("state") not in progress.UNDER_WAY:  # not twice at once
        progress.write(pending.token, {"state": "queued", "done": 0, "total": 0})
        apply_full.enqueue(pending.token, target.pk, translation.get_language())
    return redirect("data_import_progress", token=pending.token)


@login_required
@require_GET
def data_import_progress(request, token: str):
    """The apply's progress (htmx polls the partial each second), then its report; when it
    stopped part-way, what was kept and the button that finishes it from the same preview."""
    if request.session.get(RUNNING) != token:
        raise Http404("no such import")
    state = progress.read(token) or {"state": "gone"}
    pending = pending_preview(request.user)
    resume = token if state["state"] == "stopped" and pending is not None and pending.token == token else None
    target = get_object_or_404(get_user_model(), pk=pending.target_id) if pending is not None else request.user
    context = {"progress": state, "token": token, "resume": resume, "target": target}
    if request.htmx:  # the section; once ended, the upload form too (out of band)
        return render(request, "data/data.html#progress", context)
    return render(request, "data/data.html", {**context, "profiles": Profile.objects.for_user(target)})


@task()
def apply_full(token: str, user_id: int, language: str) -> str:
    """Apply a previewed full import, writing its progress for the page; returns how it ended.
    Beside the server (the embedded default) in a child process (`manage.py data_import`);
    elsewhere (a task worker, a test), here."""
    with translation.override(language):
        if not child.beside_server():
            return run_full_apply(token, user_id)
        # The child says how it ended (not the progress file, which anyone may have written since).
        try:
            return child.ask("data_import", {"token": token, "user_id": user_id, "dry_run": False})["state"]
        except child.Ended as exc:
            # It died before it could say how it ended (killed, out of memory, a broken start):
            # what it wrote is kept and the preview stays, to apply again.
            progress.write(token, {"state": "stopped", "error": _stopped(exc)})
            return "stopped"


def run_full_apply(token: str, user_id: int) -> str:
    """The apply itself, in this process, its progress and its end written for the page. A
    refusal drops the preview (nothing was written); an interruption keeps it (issue 25 point 6:
    applying it again finishes the import, what exists is skipped, X2)."""
    try:
        with preview_export(token) as export:
            report = import_full(data=export, user=get_user_model().objects.get(pk=user_id),
                                 progress=progress.reporter(token))
        state = {"state": "done", "report": {"counts": report.counts, "notes": report.notes[:NOTES_SHOWN]}}
        drop_preview(token)
    except BadExport as exc:
        drop_preview(token)
        state = {"state": "refused", "error": _refused(exc)}
    except ImportInterrupted as exc:
        state = {"state": "stopped", "error": _stopped(exc)}
    except Exception as exc:  # the page must learn it stopped, whatever stopped it
        log.exception("full import %s stopped", token)
        state = {"state": "stopped", "error": _stopped(exc.__class__.__name__)}
    progress.write(token, state)
    return state["state"]


def preview_report(token: str, user_id: int):
    """The stored upload `token` checked for the user `user_id` as a dry run: its report; raises
    BadExport. It only reads (no write lock), streaming the stored file: bounded in memory, depth
    and object count (memory/interop/json_stream.py)."""
    with preview_export(token) as export:
        return import_full(data=export, user=get_user_model().objects.get(pk=user_id), dry_run=True)


def _previewed(token: str, target):
    """`preview_report`, beside the server in a child process; elsewhere (a test, a separate task
    worker), here. The child's refusal, or its end without a word, is raised as BadExport."""
    if not child.beside_server():
        return preview_report(token, target.pk)
    try:
        answer = child.ask("data_import", {"token": token, "user_id": target.pk, "dry_run": True})
    except child.Ended as exc:
        raise BadExport(str(exc)) from exc
    if "refused" in answer:
        raise BadExport(answer["refused"])
    return answer["report"]


def _refused(exc: BadExport) -> str:
    """The lead in the person's language; the record and field named as the checker said them."""
    return _("This file cannot be imported; nothing was written. Details: %(reason)s") % {"reason": exc}


def _stopped(reason) -> str:
    """What the page says of an apply that stopped part-way, and why (an exception, or its name)."""
    return _("The import stopped part-way; what was written is kept. Apply it again to finish"
             " (nothing is doubled). Details: %(reason)s") % {"reason": reason}


def _page_with_error(request, target, error: str):
    return render(request, "data/data.html", {
        "target": target, "profiles": Profile.objects.for_user(target), "error": error,
    }, status=400)
