"""The profile pages (P2): create, rename, switch and delete companions; and the about page
(L2): offline mode and which model is configured — never its key."""

import re

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from memory import backups
from memory.deletion import delete_profile, profile_contents
from memory.models import Profile
from previously.llm import get_provider
from previously.llm.select import agent_model, model_lists
from previously.pages.current_profile import SESSION_KEY, current_profile
from previously.pages.profiles.cards import card_context
from previously.pages.profiles.forms import (
    CompanionSettingsForm,
    ProfileCreateForm,
    ProfileDeleteForm,
)


def _own(request, key: str) -> Profile:
    return get_object_or_404(Profile, user=request.user, key=key)


@login_required
def profile_list(request):
    """Every companion of the user, and a form to make a new one."""
    current = current_profile(request)
    form = ProfileCreateForm(user=request.user)
    if request.method == "POST":
        form = ProfileCreateForm(request.POST, user=request.user)
        if form.is_valid():
            created = form.save()
            request.session[SESSION_KEY] = created.key
            flash.success(request, _("Companion “%(name)s” created; it is now the current one.") % {"name": created.display_name})
            return redirect("profiles")
    context = {
        "profile": current,
        "profiles": Profile.objects.for_user(request.user).order_by("key"),
        "form": form,
    }
    return render(request, "profiles/list.html", context, status=400 if form.errors else 200)


@login_required
def profile_edit(request, key):
    """The companion settings page (issue 17 point 8): name, persona, language, model and
    temperature (the model server's list offered when it lists one), proactive messages and
    quiet hours, and the person's time zone."""
    target = _own(request, key)
    provider = get_provider()
    form = CompanionSettingsForm(
        request.POST or None, instance=target, lists=model_lists(), default_model=provider.model
    )
    if request.method == "POST" and form.is_valid():
        form.save()
        flash.success(request, _("Saved."))
        return redirect("profile_edit", key=target.key)
    return render(
        request,
        "profiles/edit.html",
        {"profile": current_profile(request), "target": target, "form": form, "offline": provider.offline,
         **card_context(target)},
        status=400 if form.errors else 200,
    )


@login_required
def profile_delete(request, key):
    """Delete a companion and all of it, after the user types its key."""
    target = _own(request, key)
    form = ProfileDeleteForm(request.POST or None, profile=target)
    if request.method == "POST" and form.is_valid():
        name = target.display_name
        delete_profile(target)
        if request.session.get(SESSION_KEY) == key:
            del request.session[SESSION_KEY]
        flash.success(request, _("Companion “%(name)s” and everything of it were deleted.") % {"name": name})
        return redirect("profiles")
    context = {
        "profile": current_profile(request),
        "target": target,
        "form": form,
        "contents": profile_contents(target),
    }
    return render(request, "profiles/delete.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def profile_switch(request):
    """Make another of the user's companions the current one; back to where the user was."""
    target = _own(request, request.POST.get("key", ""))
    request.session[SESSION_KEY] = target.key
    nxt = request.POST.get("next", "")
    # Pages about one profile (/p/<key>/…, a slice) have no twin in another: go to their section.
    if nxt.startswith("/p/"):
        parts = nxt.split("/")
        nxt = "/".join([*parts[:2], target.key, *parts[3:]]) if len(parts) > 3 else ""
    elif nxt.startswith("/slices/"):
        nxt = reverse("timeline")
    if not nxt.startswith("/") or nxt.startswith("//"):
        nxt = reverse("home")
    if request.htmx:
        return HttpResponseClientRedirect(nxt)
    return redirect(nxt)


@login_required
def about(request):
    """Which model answers (provider name and model, never the API key) and the main settings."""
    provider = get_provider()
    context = {
        "profile": current_profile(request),
        "provider_name": re.sub(r"//[^/@\s]*@", "//", provider.name),  # never credentials in a URL
        "model": provider.model,
        "agent_model": agent_model() if not provider.offline else "",
        "offline": provider.offline,
        "settings_shown": [
            (_("Idle gap that closes a conversation (minutes)"), settings.PREVIOUSLY_SLICE_GAP_MINUTES),
            (_("Token budget for recalled memory"), settings.PREVIOUSLY_CONTEXT_TOKENS),
            (_("Highlights must quote their message verbatim (STRICT_MID)"), settings.STRICT_MID),
            (_("Legacy mem_ fragments readable by “owner” (MEM_READ_LEGACY)"), settings.MEM_READ_LEGACY),
            (_("Days a deleted record blocks re-import (tombstones)"), settings.PREVIOUSLY_TOMBSTONE_TTL_DAYS),
        ],
    }
    if request.user.is_staff:
        kept = backups.backups()
        context |= {"last_backup": kept[0] if kept else None, "backups_kept": len(kept),
                    "keep_days": settings.PREVIOUSLY_BACKUP_KEEP_DAYS, "backup_hours": settings.PREVIOUSLY_BACKUP_HOURS}
    return render(request, "profiles/about.html", context)
