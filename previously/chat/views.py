"""The chat page (function views branching on request.htmx, STYLE 5-7)."""

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory.models import Message, Profile
from previously.agent.lifecycle import new_conversation as start_new_conversation
from previously.llm import get_provider
from previously.profiles import current_profile

PAGE_SIZE = 30


def archive_page(profile: Profile, *, before: str | None = None) -> tuple[list[Message], str | None]:
    """Up to PAGE_SIZE live lines before the line `before` (keyset on created_at, id), oldest first,
    and the mid to ask for the next older page (None when there is none)."""
    lines = Message.objects.for_profile(profile).live()
    if before:
        anchor = lines.filter(mid=before).values("created_at", "id").first()
        if anchor is None:
            return [], None
        lines = lines.filter(
            Q(created_at__lt=anchor["created_at"]) | Q(created_at=anchor["created_at"], id__lt=anchor["id"])
        )
    rows = list(lines.order_by("-created_at", "-id")[: PAGE_SIZE + 1])
    more = len(rows) > PAGE_SIZE
    page = rows[:PAGE_SIZE][::-1]
    _mark_retryable(page)
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


@login_required
def chat(request):
    profile = current_profile(request)
    page, older_than = archive_page(profile, before=request.GET.get("before") or None)
    context = {
        "profile": profile,
        "profiles": Profile.objects.for_user(request.user).order_by("key"),
        "page": page,
        "older_than": older_than,
        "lang": profile.language,
        "offline": get_provider().offline,
    }
    return render(request, "chat.html", context)


@login_required
def older(request):
    """The next older page of the archive, swapped in above the list ("load older")."""
    profile = current_profile(request)
    before = request.GET.get("before") or None
    if not request.htmx:
        return redirect(f"{reverse('home')}?before={before or ''}")
    page, older_than = archive_page(profile, before=before)
    context = {"page": page, "older_than": older_than, "lang": profile.language}
    return render(request, "chat.html#messages", context)


@login_required
@require_POST
def new_conversation(request):
    """Close the open slice, so the next message starts a new conversation (S1); its evolution
    is queued (K10)."""
    profile = current_profile(request)
    start_new_conversation(profile)
    if request.htmx:
        return render(request, "chat.html#divider", {"lang": profile.language})
    return redirect(request.POST.get("next") or "home")
