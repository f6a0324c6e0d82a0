"""A slice's page (K13, S2): its full transcript, the card at its end (K12), its card update
runs and its cognitive log. Readable without JavaScript."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone

from memory.clock import local_clock
from memory.models import CardSnapshot, EvolutionRun, Message, Profile, Slice
from memory.models.archive import DEFAULT_PROFILE_KEY
from previously.pages.card_display import card_sections
from previously.pages.current_profile import current_profile


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
            "log": slice_.log_entries.all(),
            "runs": EvolutionRun.objects.filter(slice=slice_).order_by("created_at", "id"),
            "has_snapshot": snap is not None,
            "recorded": snap is not None,
            "view": card_sections(profile, snap.text if snap else "", today=today),
            "card_url": f"{reverse('card')}?at={slice_.key}"
            + ("" if profile.key == DEFAULT_PROFILE_KEY else f"&profile={profile.key}"),
            "neighbours": _neighbours(profile, slice_),
        },
    )


def _neighbours(profile: Profile, slice_: Slice) -> dict:
    """The conversations just before and after this one (two indexed lookups)."""
    slices = Slice.objects.for_profile(profile).only("key", "profile_id")
    return {
        "previous": slices.filter(key__lt=slice_.key).order_by("-key").first(),
        "next": slices.filter(key__gt=slice_.key).order_by("key").first(),
    }
