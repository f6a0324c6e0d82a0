"""A companion's card pages (SPEC H2-H4, issue 27 points 5, 7, 8): make or update a companion
from a character card (preview, then apply), its avatar, its lorebook, catching up on its
history, and leaving: a conversation or the companion as Markdown, a SillyTavern chat or a V2
character card."""

import io
import itertools
import re
from collections.abc import Iterator
from datetime import date

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memory.images import read_avatar, sniff
from memory.interop.character_card import (
    CardRefused,
    export_card_json,
    export_card_png,
    import_character_card,
    person_name,
)
from memory.interop.previews import drop_preview, preview_exists, preview_file, save_preview
from memory.interop.transcripts import markdown, sillytavern_jsonl
from memory.models import CompanionCard, LoreEntry, Profile, Slice
from previously.agent import catch_up
from previously.pages.current_profile import SESSION_KEY, current_profile

PENDING = "card_import_pending"


def own(request, key: str) -> Profile:
    return get_object_or_404(Profile, user=request.user, key=key)


def card_context(target: Profile) -> dict:
    """What the settings page shows of the card: its source, lorebook, exports and catch-up."""
    found = catch_up.plan(target)
    return {
        "companion_card": CompanionCard.objects.filter(profile=target).first(),
        "lore": list(LoreEntry.objects.for_profile(target)),
        "catch_up_plan": found,
        "catch_up": catch_up.latest(target),
        "slices_count": Slice.objects.for_profile(target).count(),
    }


# --- importing a card ----------------------------------------------------------------------------


@login_required
@require_POST
def card_import_preview(request):
    """Upload a card: a dry run says what it would make or change; nothing is written yet."""
    upload = request.FILES.get("card")
    key = (request.POST.get("profile") or "").strip() or None
    back = redirect("profile_edit", key=key) if key and Profile.objects.filter(user=request.user, key=key).exists() else redirect("profiles")
    if upload is None:
        flash.error(request, _("Choose a character card to upload (a PNG or a .json)."))
        return back
    limit = settings.PREVIOUSLY_IMAGE_MAX_BYTES
    if upload.size > limit:
        flash.error(request, _("%(file)s is %(size)s bytes; a character card may be at most %(limit)s (PREVIOUSLY_IMAGE_MAX_BYTES).")
                    % {"file": upload.name, "size": f"{upload.size:,}", "limit": f"{limit:,}"})
        return back
    drop_preview((request.session.pop(PENDING, None) or {}).get("token"))
    token = save_preview(upload, uploader=request.user, target=request.user, kind="card")
    try:
        report = import_character_card(_stored(token), user=request.user, profile_key=key, dry_run=True, name=upload.name)
    except CardRefused as exc:
        drop_preview(token)
        flash.error(request, str(exc))
        return back
    request.session[PENDING] = {"token": token, "profile": key, "name": upload.name[:200]}
    return render(request, "profiles/card_import.html", {"profile": current_profile(request), "report": report, "token": token})


def _stored(token: str) -> bytes:
    with preview_file(token).open_file() as fh:
        return fh.read()


@login_required
@require_POST
def card_import_apply(request):
    pending = request.session.get(PENDING) or {}
    if not pending or pending.get("token") != request.POST.get("token"):
        return redirect("profiles")
    del request.session[PENDING]
    token = pending["token"]
    if "cancel" in request.POST:
        drop_preview(token)
        return redirect("profiles")
    if not preview_exists(token):
        flash.error(request, _("That preview has expired; upload the card again."))
        return redirect("profiles")
    try:
        report = import_character_card(_stored(token), user=request.user, profile_key=pending["profile"], name=pending["name"])
    except CardRefused as exc:
        flash.error(request, str(exc))
        return redirect("profiles")
    finally:
        drop_preview(token)
    request.session[SESSION_KEY] = report.profile_key
    flash.success(request, (_("Companion “%(name)s” made from the card.") if report.created
                            else _("Companion “%(name)s” updated from the card.")) % {"name": report.card_name})
    return redirect("profile_edit", key=report.profile_key)


# --- the avatar ----------------------------------------------------------------------------------


@login_required
@require_GET
def avatar(request, key):
    """The companion's avatar (or `?thumb=1` its thumbnail), only for its person (P2)."""
    target = own(request, key)
    data = read_avatar(target, thumb=request.GET.get("thumb") == "1")
    if data is None:
        raise Http404("no avatar")
    # S4: the type is read from the stored bytes themselves, never from the avatar's metadata.
    content_type = sniff(io.BytesIO(data))
    if content_type is None:
        raise Http404("avatar file is not an image")
    response = HttpResponse(data, content_type=content_type)
    response["Content-Disposition"] = f'inline; filename="avatar.{content_type.rsplit("/", 1)[-1]}"'
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    return response


# --- leaving (H4) ---------------------------------------------------------------------------------

STREAM_BATCH = 200  # pieces (lines, headings) pulled from the database thread at a time
EXPORTS = {
    "md": ("text/markdown; charset=utf-8", "md"),
    "jsonl": ("application/jsonl; charset=utf-8", "jsonl"),
    "card.png": ("image/png", "png"),
    "card.json": ("application/json; charset=utf-8", "json"),
}


@login_required
@require_GET
def export(request, key, fmt):
    """A conversation (`?slice=KEY`) or the whole companion as Markdown or a SillyTavern chat,
    streamed; the companion as a V2 character card (PNG with its avatar, or JSON)."""
    target = own(request, key)
    if fmt not in EXPORTS:
        raise Http404("no such export")
    content_type, ext = EXPORTS[fmt]
    slice_key = request.GET.get("slice") or ""
    slice_ = get_object_or_404(Slice.objects.for_profile(target), key=slice_key) if slice_key else None
    stem = _file_stem(target.display_name, target.key) + (f"-{slice_.key}" if slice_ else "")
    if fmt == "card.png":
        response = HttpResponse(export_card_png(target, image=read_avatar(target)), content_type=content_type)
        stem = _file_stem(target.display_name, target.key)
    elif fmt == "card.json":
        response = HttpResponse(export_card_json(target), content_type=content_type)
        stem = _file_stem(target.display_name, target.key)
    else:
        person = person_name(request.user)
        write = markdown if fmt == "md" else sillytavern_jsonl
        pieces = (piece.encode() for piece in write(target, person=person, slice_=slice_))
        response = StreamingHttpResponse(_streamed(request, pieces), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{stem}.{ext}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _streamed(request, pieces: Iterator[bytes]):
    """Under ASGI, an async iterator that pulls a batch of pieces at a time in the sync thread
    (the queries stay off the event loop, and memory stays bounded: Django would otherwise read
    a sync iterator whole before sending it); under WSGI, the pieces as they are."""
    if not isinstance(request, ASGIRequest):
        return pieces
    take = sync_to_async(lambda: b"".join(itertools.islice(pieces, STREAM_BATCH)), thread_sensitive=True)

    async def batches():
        while chunk := await take():
            yield chunk

    return batches()


def _file_stem(name: str, key: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")
    return stem or key


# --- catching up (H3) ------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def catch_up_action(request, key):
    """Start (after the page showed the runs and the estimate) or stop the card's catch-up; GET
    is its section of the settings page, which polls it while the catch-up runs."""
    target = own(request, key)
    if request.method == "GET":
        return render(request, "profiles/card_sections.html#catch_up", {"target": target, **card_context(target)})
    if request.POST.get("action") == "stop":
        stopped = catch_up.stop(target)
        if stopped is not None:
            flash.success(request, _("The catch-up stops after the conversation in progress."))
        return redirect("profile_edit", key=target.key)
    try:
        since = date.fromisoformat(request.POST["since"]) if request.POST.get("since") else None
    except ValueError:
        flash.error(request, _("“%(value)s” is not a date (YYYY-MM-DD).") % {"value": request.POST.get("since", "")[:20]})
        return redirect("profile_edit", key=target.key)
    try:
        started = catch_up.start(target, since=since)
    except (catch_up.NoModel, catch_up.AlreadyRunning) as exc:
        flash.error(request, str(exc))
        return redirect("profile_edit", key=target.key)
    started.refresh_from_db()
    flash.success(request, _("The card is catching up: %(runs)s conversations, oldest first.") % {"runs": started.planned})
    return redirect("profile_edit", key=target.key)
