"""A slice's page (K13, S2): its full transcript, the card at its end (K12), its card update
runs and its cognitive log. Readable without JavaScript."""

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods

from memory.clock import local_clock
from memory.deletion import delete_slice, slice_refs
from memory.models import CardSnapshot, EvolutionRun, Message, Profile, Slice
from memory.models.archive import DEFAULT_PROFILE_KEY
from previously.pages.card_display import card_sections
from previously.pages.current_profile import current_profile
from previously.pages.forget_refs import refs_context
from previously.pages.slices.log_lines import known, log_line


@login_required
def slice_page(request, key: str):
    """One slice in full (K13): every line (each at #msg-<mid>), the card at its end (K12),
    its card update runs and its cognitive log (S2)."""
    profile = current_profile(request)
    slice_ = get_object_or_404(Slice.objects.for_profile(profile), key=key)
    snap = CardSnapshot.objects.filter(slice=slice_).first()
    today = local_clock(slice_.ended_at or timezone.now(), slice_.tz).local.date()
    return render(
        request,
        "slices/slice.html",
        {
            "profile": profile,
            "slice": slice_,
            "messages_": Message.objects.in_slice(slice_).live().chronological(),
            "log": _with_lines(slice_.log_entries.all()),
            "runs": _with_texts(EvolutionRun.objects.filter(slice=slice_).order_by("created_at", "id")),
            "has_snapshot": snap is not None,
            "recorded": snap is not None,
            "view": card_sections(profile, snap.text if snap else "", today=today),
            "card_url": f"{reverse('card')}?at={slice_.key}"
            + ("" if profile.key == DEFAULT_PROFILE_KEY else f"&profile={profile.key}"),
            "neighbours": _neighbours(profile, slice_),
        },
    )


def _with_lines(entries) -> list:
    """The cognitive log, each entry with its `line` in the interface language."""
    entries = list(entries)
    for entry in entries:
        entry.line = log_line(entry)
    return entries


def _with_texts(runs) -> list:
    """The card update runs, each with its skip reason and error in the interface language."""
    runs = list(runs)
    for run in runs:
        run.skip_text, run.error_text = known(run.skip_reason), known(run.error)
    return runs


@login_required
@require_http_methods(["GET", "POST"])
def slice_delete(request, key: str):
    """Delete a whole conversation for good (D6, D7): GET shows what goes with it and asks
    about the citing card lines and the quoting replies; POST runs `memory.deletion.delete_slice`."""
    profile = current_profile(request)
    slice_ = get_object_or_404(Slice.objects.for_profile(profile), key=key)
    lines = Message.objects.in_slice(slice_).count()
    if request.method == "POST":
        result = delete_slice(slice_, keep_replies=request.POST.get("keep_replies") == "1",
                              drop_lines=request.POST.getlist("drop_line"))
        notice = ngettext(
            "Conversation %(ref)s and its %(n)d line were deleted for good.",
            "Conversation %(ref)s and its %(n)d lines were deleted for good.", lines,
        ) % {"ref": slice_.ref, "n": lines}
        if result.card_lines_removed:
            n = len(result.card_lines_removed)
            notice += " " + ngettext("%(n)d line of the card went with it.",
                                     "%(n)d lines of the card went with it.", n) % {"n": n}
        flash.success(request, notice)
        return redirect(reverse("timeline") + _profile_query(profile))
    context = {
        "profile": profile,
        "slice": slice_,
        "lines": lines,
        "back": reverse("slice", args=[slice_.key]) + _profile_query(profile),
        **refs_context(slice_refs(slice_), made_at=slice_.started_at),
    }
    return render(request, "slices/delete.html", context)


def _profile_query(profile: Profile) -> str:
    return f"?profile={profile.key}"


def _neighbours(profile: Profile, slice_: Slice) -> dict:
    """The conversations just before and after this one (two indexed lookups)."""
    slices = Slice.objects.for_profile(profile).only("key", "profile_id")
    return {
        "previous": slices.filter(key__lt=slice_.key).order_by("-key").first(),
        "next": slices.filter(key__gt=slice_.key).order_by("key").first(),
    }
