"""The chat page (function views branching on request.htmx, STYLE 5-7)."""


from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST

from memory import limits
from memory.archive import MidConflict, MidTombstoned
from memory.curation import HighlightRefused, add_favourite, remove_favourite
from memory.images import ImageRefused, sniff, store_image_message, stored_path
from memory.models import Experience, Favourite, Highlight, LoreEntry, Message, Profile, Slice
from memory.models.archive import USER_MID_RE, is_slice_key
from previously.agent.lifecycle import archive_line
from previously.agent.lifecycle import new_conversation as start_new_conversation
from previously.chat.markdown import link_host
from previously.chat.turn import mark_alternatives, reply_in_background
from previously.llm import get_provider
from previously.pages.current_profile import current_profile
from previously.pages.refusals import refusal
from previously.pages.safe_urls import local_path

PAGE_SIZE = 30
CONVERSATIONS_PAGE = 30  # conversations listed in the side panel per page (issue 17 point 7)
FIRST_WORDS = 80  # characters of a conversation's first line shown in the list
PAST_LINES = 300  # lines of a past conversation shown in place; the rest are on its page


def archive_page(profile: Profile, *, before: str | None = None) -> tuple[list[Message], str | None]:
    """Up to PAGE_SIZE live lines before the line `before` (keyset on created_at, id), oldest first,
    and the mid to ask for the next older page (None when there is none)."""
    rows = list(Message.objects.for_profile(profile).live().page_from(before)[: PAGE_SIZE + 1])
    more = len(rows) > PAGE_SIZE
    page = rows[:PAGE_SIZE][::-1]
    _mark_retryable(page)
    mark_alternatives(page)
    return page, (page[0].mid if more and page else None)


def _mark_retryable(page: list[Message]) -> None:
    """A failed reply offers retry when its user line is on the page and no reply followed it."""
    last_user = ""
    for i, message in enumerate(page):
        message.reply_to, message.can_retry = "", False
        if message.speaker == Message.Speaker.USER:
            last_user = message.mid
        elif message.status == Message.Status.FAILED and last_user:
            following = page[i + 1] if i + 1 < len(page) else None
            message.reply_to = last_user
            message.can_retry = following is None or following.speaker == Message.Speaker.USER


def conversations_page(profile: Profile, *, before: str = "") -> tuple[list[Slice], str]:
    """Issue 17 point 7: the profile's conversations (slices) newest first, CONVERSATIONS_PAGE at
    a time (keyset on the key, which sorts as the local start minute), each with its count of
    live lines (`n_lines`) and the first words of its first live line (`first_words`), and the
    key to continue from ("" when there is no more). One query whatever the page's size."""
    slices = Slice.objects.for_profile(profile)
    if before:
        slices = slices.filter(key__lt=before)
    rows = list(slices.with_line_count().with_first_words(FIRST_WORDS).order_by("-key")[: CONVERSATIONS_PAGE + 1])
    more = len(rows) > CONVERSATIONS_PAGE
    rows = rows[:CONVERSATIONS_PAGE]
    return rows, (rows[-1].key if more and rows else "")


def _past(profile: Profile, key: str) -> dict:
    """A past conversation to show in place of the live one: the slice and its first PAST_LINES
    live lines, oldest first (`past_more`: it holds more)."""
    slice_ = get_object_or_404(Slice.objects.for_profile(profile), key=key)
    lines = list(Message.objects.in_slice(slice_).live().chronological()[: PAST_LINES + 1])
    return {"past": slice_, "past_lines": lines[:PAST_LINES], "past_more": len(lines) > PAST_LINES}


def _now_key(profile: Profile) -> str:
    """The open conversation's key ("now"), "" when none is open."""
    open_ = Slice.objects.newest_open(profile.pk)
    return open_.key if open_ else ""


@login_required
def chat(request):
    profile = current_profile(request)
    page, older_than = archive_page(profile, before=request.GET.get("before") or None)
    asked = request.GET.get("conversation", "")
    past = _past(profile, asked) if is_slice_key(asked) else {}
    conversations, more_before = conversations_page(profile)
    now_key = _now_key(profile)
    context = {
        "profile": profile,
        "page": page,
        "older_than": older_than,
        "lang": profile.language,
        "offline": get_provider().offline,
        "image_max_bytes": settings.PREVIOUSLY_IMAGE_MAX_BYTES,
        "conversations": conversations,
        "more_before": more_before,
        "now_key": now_key,
        "shown_key": past["past"].key if past else now_key,
        **past,
    }
    return render(request, "chat/chat.html", context)


@login_required
@require_GET
def conversation(request, key: str):
    """A past conversation shown in place of the live one (htmx); without JavaScript the chat
    page itself shows it (?conversation=)."""
    profile = current_profile(request)
    if not is_slice_key(key):
        raise Http404("no such conversation")
    past = _past(profile, key)  # another person's key is a 404 here too (P2)
    if not request.htmx:
        return redirect(f"{reverse('home')}?profile={profile.key}&conversation={key}")
    context = {"profile": profile, "lang": profile.language, **past}
    return render(request, "chat/chat.html#past", context)


@login_required
@require_GET
def conversations(request):
    """The next older page of the side panel's list (htmx); without JavaScript the timeline
    continues from the same key."""
    profile = current_profile(request)
    before = request.GET.get("before", "")
    if not is_slice_key(before):
        before = ""
    if not request.htmx:
        return redirect(f"{reverse('timeline')}?profile={profile.key}&before={before}")
    rows, more_before = conversations_page(profile, before=before)
    context = {
        "profile": profile, "lang": profile.language, "conversations": rows, "more_before": more_before,
        "now_key": _now_key(profile),
    }
    return render(request, "chat/chat.html#conversation_items", context)


@login_required
def older(request):
    """The next older page of the archive, swapped in above the list ("load older")."""
    profile = current_profile(request)
    before = request.GET.get("before") or None
    if not request.htmx:
        return redirect(f"{reverse('home')}?before={before or ''}")
    page, older_than = archive_page(profile, before=before)
    context = {"page": page, "older_than": older_than, "lang": profile.language, "profile": profile}
    return render(request, "chat/chat.html#messages", context)


@login_required
@require_POST
def new_conversation(request):
    """Close the open slice, so the next message starts a new conversation (S1); its evolution
    is queued (K10)."""
    profile = current_profile(request)
    start_new_conversation(profile)
    if request.htmx:
        return render(request, "chat/chat.html#divider", {"lang": profile.language})
    return redirect(local_path(request.POST.get("next")) or "home")


def _refused(text: str, status: int) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


@login_required
@require_POST
def upload_image(request):
    """A7: an image message from the page (multipart, CSRF): check it by content, store it,
    archive it as message_type=image. The page then asks the socket for the reply."""
    profile = current_profile(request)
    mid = request.POST.get("mid", "")
    upload = request.FILES.get("image")
    if not USER_MID_RE.fullmatch(mid):
        return _refused(gettext("invalid message id: expected c_ and 16 hex digits"), 400)
    if upload is None:
        return _refused(gettext("no image in the request"), 400)
    limit = settings.PREVIOUSLY_IMAGE_MAX_BYTES
    if upload.size > limit:  # refused before reading it into memory
        return _refused(gettext("image too large (%(size)d bytes, limit %(limit)d, PREVIOUSLY_IMAGE_MAX_BYTES)") % {"size": upload.size, "limit": limit}, 413)
    caption = request.POST.get("text", "").strip()
    try:
        limits.MESSAGE.check(caption)  # S6: a caption is a chat line (nothing is stored)
    except limits.TextTooLong as too_long:
        return _refused(f"{too_long}", 413)
    try:
        # A slice it closes gets its snapshot and evolution, as for a text message.
        archived = archive_line(
            store_image_message, profile=profile, mid=mid, data=upload.read(), name=upload.name or "",
            caption=caption, tz=request.POST.get("tz") or None, local_time=request.POST.get("local_time") or None,
        )
    except ImageRefused as refused:
        return _refused(refused.reason, refused.status)
    except MidTombstoned as gone:
        return _refused(gettext("message %(mid)s was deleted for good; it is not stored again") % {"mid": gone.mid}, 410)
    except MidConflict as conflict:
        return _refused(str(conflict), 409)
    if not request.htmx:
        # No JavaScript, so no socket to ask for the reply: the turn runs as a task and the
        # reply is in the archive at the next load.
        if archived.created:
            reply_in_background.enqueue(profile.pk, mid)
        if archived.note:
            flash.info(request, archived.note)
        return redirect("home")
    response = render(
        request, "chat/chat.html#appended", {"message": archived.message, "lang": profile.language,
                                             "note": archived.note},
        status=201 if archived.created else 200,
    )
    response["X-Message-Mid"] = archived.message.mid
    return response


@login_required
def image(request, pk: int, thumb: bool = False):
    """An image message's file or thumbnail, only for the user whose profile it belongs to;
    anyone else gets the same 404 as for a missing one (P2)."""
    message = get_object_or_404(
        Message.objects.live(), pk=pk, profile__user=request.user, message_type=Message.Type.IMAGE
    )
    path = stored_path(message, thumb=thumb)
    if not path:
        raise Http404("image file not migrated")
    try:
        f = default_storage.open(path, "rb")
    except (OSError, ValueError):
        raise Http404("image file missing") from None
    # S4: the type is read from the stored file itself, never from the attachment metadata
    # (which an import sets); a file that is not one of our image formats is not served.
    content_type = sniff(f)
    if content_type is None:
        f.close()
        raise Http404("image file is not an image")
    f.seek(0)
    response = FileResponse(f, content_type=content_type)
    response["Content-Disposition"] = f'inline; filename="image.{content_type.rsplit("/", 1)[-1]}"'
    response["Cache-Control"] = "private, max-age=86400"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_POST
def proactive_switch(request):
    """K15: switch messages written first on or off for the current profile."""
    profile = current_profile(request)
    profile.proactive_enabled = request.POST.get("enabled") == "1"
    profile.save(update_fields=["proactive_enabled"])
    if request.htmx:
        return render(request, "chat/chat.html#proactive_toggle", {"profile": profile, "lang": profile.language})
    return redirect("home")


# --- favourites from a chat line (C2) ---------------------------------------------------


@login_required
@require_POST
def favourite_line(request, mid: str):
    """Favourite a chat line in place: the whole line, or the words selected in it (`excerpt`,
    filled in by chat.js); refused unless verbatim (C1)."""
    profile = current_profile(request)
    message = get_object_or_404(Message.objects.live(), profile=profile, mid=mid)
    try:
        fav = add_favourite(profile=profile, message=message, excerpt=request.POST.get("excerpt", ""))
    except HighlightRefused as refused:
        fav, notice = None, gettext("Not saved: %(reason)s") % {"reason": refusal(refused)}
    else:
        notice = gettext("Saved to favourites ★")
    if request.htmx:
        context = {"message": message, "fav": fav, "fav_notice": notice, "fav_kind": "ok" if fav else "error",
                   "lang": profile.language}
        return render(request, "chat/chat.html#fav", context, status=200 if fav else 422)
    (flash.success if fav else flash.error)(request, notice)
    return redirect(f"{reverse('home')}#msg-{mid}")


@login_required
@require_POST
def unfavourite_line(request, pk: int):
    profile = current_profile(request)
    fav = get_object_or_404(Favourite, pk=pk, profile=profile)
    message = fav.message
    remove_favourite(fav)
    if request.htmx:
        context = {"message": message, "fav": None, "fav_notice": gettext("Removed from favourites"), "fav_kind": "ok",
                   "lang": profile.language}
        return render(request, "chat/chat.html#fav", context)
    flash.success(request, gettext("Removed from favourites"))
    return redirect(local_path(request.POST.get("next")) or f"{reverse('home')}#msg-{message.mid}")


@login_required
@require_GET
def leave(request):
    """Issue 24 point 9: the click-through for a link in a reply that leads to another host:
    the whole address and its host, shown before anyone goes there (the link itself carries
    rel="noopener noreferrer"). Anything but an http(s) address with a host is refused."""
    to = request.GET.get("to", "")
    host = link_host(to)
    context = {"profile": current_profile(request), "to": to if host else "", "host": host}
    return render(request, "chat/leave.html", context, status=200 if host else 400)


class _Gone:
    """Stands for a line, highlight or experience deleted since the reply (no text kept)."""

    gone = True


def _in_order(ids: list[int], found: dict) -> list:
    return [found.get(pk, _Gone()) for pk in ids]


@login_required
def why(request, mid: str):
    """U4: what the reply `mid`'s prompt held, from the ids and counts stored on it."""
    profile = current_profile(request)
    reply = get_object_or_404(
        Message.objects.for_profile(profile), mid=mid, speaker=Message.Speaker.ASSISTANT, prompt_trace__isnull=False
    )
    trace = reply.prompt_trace
    lines = Message.objects.for_profile(profile).filter(pk__in=trace.get("recalled", [])).select_related("slice")
    context = {
        "profile": profile,
        "lang": profile.language,
        "reply": reply,
        "trace": trace,
        "recalled": _in_order(trace.get("recalled", []), {m.pk: m for m in lines}),
        "highlights": _in_order(trace.get("highlights", []), {
            h.pk: h for h in Highlight.objects.filter(profile=profile, pk__in=trace.get("highlights", []))
        }),
        "experiences": _in_order(trace.get("experiences", []), {
            e.pk: e for e in Experience.objects.filter(profile=profile, pk__in=trace.get("experiences", []))
        }),
        "lore": _in_order(trace.get("lore", []), {
            e.pk: e for e in LoreEntry.objects.filter(profile=profile, pk__in=trace.get("lore", []))
        }),
    }
    if request.htmx:
        return render(request, "chat/chat.html#why", context)
    return render(request, "chat/why.html", context)
