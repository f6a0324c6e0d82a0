"""Download a full export and upload one with a dry-run preview (SPEC X1, X2, P2).

The preview and the apply read the whole upload; beside the server they run in a child process
(`manage.py data_import`, previously/child.py), so their parsing neither holds the GIL every other
person's page and socket wait for nor leaves the server process the memory it took (S4, issue 24
point 6). The request waits for the child and shows its report as before."""

import tempfile

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.signals import user_logged_out
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

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
    # S4, issue 24 point 7: one pending preview per person — this one replaces any earlier one.
    token = save_preview(upload, uploader=request.user, target=target)  # as sent, streamed from its temp file
    try:
        report = _imported(token, target, dry_run=True)
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
    try:
        report = _imported(pending.token, target, dry_run=False)
    except BadExport as exc:
        drop_preview(pending.token)
        return _page_with_error(request, target, _refused(exc))
    except ImportInterrupted as exc:
        # Issue 25 point 6: what was written stays and the preview is kept, so applying it again
        # finishes the import (what exists is skipped, X2) without uploading the file again.
        return _page_with_error(request, target, _(
            "The import stopped part-way; what was written is kept. Apply it again to finish"
            " (nothing is doubled). Details: %(reason)s") % {"reason": exc}, resume=pending.token)
    drop_preview(pending.token)
    return render(request, "data/data.html", {
        "target": target, "profiles": Profile.objects.for_user(target), "applied": report,
    })


def full_report(token: str, user_id: int, *, dry_run: bool):
    """The stored upload `token` imported for the user `user_id`, or only checked (`dry_run`): its
    report; raises BadExport (nothing written) or ImportInterrupted (what was written is kept)."""
    # A dry run only reads (no write lock), streaming the stored file: bounded in memory, depth
    # and object count (memory/interop/json_stream.py).
    with preview_export(token) as export:
        return import_full(data=export, user=get_user_model().objects.get(pk=user_id), dry_run=dry_run)


def _imported(token: str, target, *, dry_run: bool):
    """`full_report`, beside the server in a child process; elsewhere (a test, a separate task
    worker), here. The child's refusal or interruption is raised here as it was there."""
    if not child.beside_server():
        return full_report(token, target.pk, dry_run=dry_run)
    try:
        answer = child.ask("data_import", {"token": token, "user_id": target.pk, "dry_run": dry_run})
    except child.Ended as exc:
        raise (BadExport(str(exc)) if dry_run else ImportInterrupted(str(exc))) from exc  # a preview wrote nothing
    if "refused" in answer:
        raise BadExport(answer["refused"])
    if "interrupted" in answer:
        raise ImportInterrupted(answer["interrupted"])
    return answer["report"]


def _refused(exc: BadExport) -> str:
    """The lead in the person's language; the record and field named as the checker said them."""
    return _("This file cannot be imported; nothing was written. Details: %(reason)s") % {"reason": exc}


def _page_with_error(request, target, error: str, *, resume: str | None = None):
    return render(request, "data/data.html", {
        "target": target, "profiles": Profile.objects.for_user(target), "error": error, "resume": resume,
    }, status=400)
