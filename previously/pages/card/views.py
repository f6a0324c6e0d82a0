"""The "Previously On" card page (K12: the card now, or as it was at the end of any slice)
and the beliefs page (what the companion believes: the live card, experiences to review and
confirmed, highlights, relations, counts at a glance — a constant number of queries).
Readable without JavaScript."""

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from memory.card.lines import SECTIONS
from memory.card.store import live_card
from memory.card_corrections import (
    EditRefused,
    add_line,
    edit_line,
    remove_line,
    revert_to,
    set_portrait,
)
from memory.clock import local_clock
from memory.models import (
    CardSnapshot,
    EvolutionRun,
    Experience,
    Highlight,
    Message,
    Relation,
    Slice,
)
from previously.pages.card_display import card_sections, run_summary, section_label
from previously.pages.current_profile import current_profile


@login_required
def card_page(request):
    """The live card, or with ?at=<slice> the card as it was when that slice ended (K12)."""
    profile = current_profile(request)
    at = request.GET.get("at", "")
    selected = None
    if at:
        selected = get_object_or_404(Slice.objects.for_profile(profile).by_ref(at))
        snap = CardSnapshot.objects.filter(profile=profile, slice=selected).first()
        text = snap.text if snap else None
    else:
        row = live_card(profile)
        text = row.text
    tz = selected.tz if selected else "UTC"
    context = {
        "profile": profile,
        "selected": selected,
        "editable": selected is None,
        "version": None if selected else row.version,
        "add_sections": [(attr, section_label(name)) for attr, name in SECTIONS],
        "has_snapshot": bool(selected and text is not None),
        "live_version": live_card(profile).version if selected else None,
        "edit_url": reverse("card_edit") + (f"?profile={profile.key}" if profile.key != "owner" else ""),
        "recorded": text is not None,
        "view": card_sections(profile, text or "", today=local_clock(timezone.now(), tz).local.date()),
        "slices": Slice.objects.for_profile(profile).closed().order_by("-started_at")[:60],
    }
    template = "card/card.html#card" if getattr(request, "htmx", False) else "card/card.html"
    return render(request, template, context)


@login_required
@require_POST
def card_edit(request):
    """K16: the person's hand edits — edit, remove, add, portrait, revert — each one run."""
    profile = current_profile(request)
    post = request.POST
    action = post.get("action", "")
    try:
        version = int(post.get("version", ""))
    except ValueError:
        version = -1
    common = {"version": version, "user": request.user}
    back = reverse("card") + (f"?profile={profile.key}" if profile.key != "owner" else "")
    try:
        if action == "edit":
            done = edit_line(profile, key=post.get("key", ""), text=post.get("text", ""), by=post.get("by") or None, **common)
        elif action == "remove":
            done = remove_line(profile, key=post.get("key", ""), **common)
        elif action == "add":
            done = add_line(profile, attr=post.get("section", ""), text=post.get("text", ""), by=post.get("by") or None, **common)
        elif action == "portrait":
            done = set_portrait(profile, text=post.get("text", ""), **common)
        elif action == "revert":
            done = revert_to(profile, slice_key=post.get("slice", ""), **common)
        else:
            flash.error(request, gettext("Unknown card action."))
            return redirect(back)
    except EditRefused as refused:
        flash.error(request, gettext("Not changed: %(reason)s") % {"reason": refused.reason})
        return redirect(back)
    flash.success(request, gettext("Saved: %(summary)s") % {"summary": run_summary(done.run)})
    return redirect(back)


SHOWN = 10  # experiences of each kind and highlights listed here; the full lists are a link away


@login_required
def beliefs(request):
    profile = current_profile(request)
    experiences = Experience.objects.for_profile(profile).prefetch_related("source_links", "history__actor_user")
    counts = {
        "messages": Message.objects.for_profile(profile).live().count(),
        "slices": Slice.objects.for_profile(profile).count(),
        "highlights": Highlight.objects.for_profile(profile).live().count(),
        "active": Experience.objects.for_profile(profile).active().count(),
        "candidates": Experience.objects.for_profile(profile).candidates().count(),
        "relations": Relation.objects.for_profile(profile).live().count(),
    }
    last_slice = Slice.objects.for_profile(profile).order_by("-key").only("tz").first()
    tz = last_slice.tz if last_slice else "UTC"
    context = {
        "profile": profile,
        "counts": counts,
        "recorded": True,
        "view": card_sections(profile, live_card(profile).text, today=local_clock(timezone.now(), tz).local.date()),
        "last_run": EvolutionRun.objects.filter(profile=profile)
        .exclude(status__in=[EvolutionRun.Status.QUEUED, EvolutionRun.Status.RUNNING])
        .defer("steps", "card_before", "card_after")
        .first(),
        "candidates": list(experiences.candidates().order_by("-recorded_at", "id")[:SHOWN]),
        "active": list(experiences.active().order_by("-recorded_at", "id")[:SHOWN]),
        "highlights": list(
            Highlight.objects.for_profile(profile).live().select_related("message__slice").order_by("-created_at", "id")[:SHOWN]
        ),
    }
    return render(request, "card/beliefs.html", context)
