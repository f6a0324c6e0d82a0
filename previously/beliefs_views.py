"""What the companion believes (K, C): the live card, experiences to review and confirmed,
highlights, relations, and counts at a glance — one page, a constant number of queries."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone

from memory.card.store import live_card
from memory.clock import local_clock
from memory.models import EvolutionRun, Experience, Highlight, Message, Relation, Slice
from previously.card_views import _card_view
from previously.profiles import current_profile

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
        "view": _card_view(profile, live_card(profile).text, today=local_clock(timezone.now(), tz).local.date()),
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
    return render(request, "beliefs.html", context)
