"""The "Previously On" pages (K12, K13, S2): the card now or at the end of any slice, and
each slice's full transcript with its cognitive log. Readable without JavaScript."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone

from memory.card import detect_format, flags, limits, parse
from memory.card.store import live_card
from memory.clock import local_clock
from memory.models import CardSnapshot, EvolutionRun, Message, Profile, Slice
from memory.models.archive import DEFAULT_PROFILE_KEY
from previously.profiles import current_profile


def _slice_url(profile: Profile, ref: str) -> str:
    url = reverse("slice", args=[ref.replace("/", "-")])
    return url if profile.key == DEFAULT_PROFILE_KEY else f"{url}?profile={profile.key}"


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
        text = live_card(profile).text
    tz = selected.tz if selected else "UTC"
    context = {
        "profile": profile,
        "selected": selected,
        "recorded": text is not None,
        "view": _card_view(profile, text or "", today=local_clock(timezone.now(), tz).local.date()),
        "slices": Slice.objects.for_profile(profile).closed().order_by("-started_at")[:60],
    }
    template = "card/card.html#card" if getattr(request, "htmx", False) else "card/card.html"
    return render(request, template, context)


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
        "card/slice.html",
        {
            "profile": profile,
            "slice": slice_,
            "messages_": Message.objects.in_slice(slice_).live().chronological(),
            "log": slice_.log_entries.all(),
            "runs": EvolutionRun.objects.filter(slice=slice_).order_by("created_at", "id"),
            "has_snapshot": snap is not None,
            "recorded": snap is not None,
            "view": _card_view(profile, snap.text if snap else "", today=today),
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


def _card_view(profile: Profile, text: str, *, today) -> dict:
    """The card as display sections: items with their ref links, usage and flags."""
    fmt = detect_format(text)
    if fmt != "v5":
        return {"format": fmt, "raw": text}
    card = parse(text)
    flagged = {(f.section, f.index): f for f in flags(card, today=today)}

    def refs(values):
        return [{"ref": r, "url": _slice_url(profile, r)} for r in values]

    def item(section, k, text, values, meta=""):
        flag = flagged.get((section, k))
        return {"n": k, "text": text, "refs": refs(values), "meta": meta, "flag": flag}

    return {
        "format": fmt,
        "header": card.header,
        "sections": [
            {
                "name": "Identity",
                "usage": f"{len(card.identity)}/{limits.IDENTITY_MAX_LINES} lines",
                "items": [
                    item("Identity", k, f"{i.field}: {i.value}", i.refs)
                    for k, i in enumerate(card.identity, 1)
                ],
            },
            {
                "name": "Past",
                "usage": f"{len(card.portrait)}/{limits.PORTRAIT_MAX_CHARS} chars · "
                f"{len(card.facts)}/{limits.ANCHOR_FACTS_MAX} facts",
                "portrait": card.portrait,
                "items": [item("Past", k, f.text, f.refs) for k, f in enumerate(card.facts, 1)],
            },
            {
                "name": "Now",
                "usage": f"{len(card.now)}/{limits.NOW_MAX}",
                "items": [
                    item("Now", k, n.text, n.refs, f"since {n.since.isoformat()}")
                    for k, n in enumerate(card.now, 1)
                ],
            },
            {
                "name": "Horizon",
                "usage": f"{len(card.horizon)}/{limits.HORIZON_MAX}",
                "items": [
                    item("Horizon", k, h.text, h.refs, f"by {h.by.isoformat()}")
                    for k, h in enumerate(card.horizon, 1)
                ],
            },
            {
                "name": "Self-model",
                "usage": f"{len(card.lessons)}/{limits.LESSONS_MAX} lessons",
                "items": [item("Self-model", k, x.text, x.refs) for k, x in enumerate(card.lessons, 1)],
            },
        ],
    }
