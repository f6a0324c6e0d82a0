"""The timeline (S1, S2, K8, K11): conversations by day, what each changed on the card.

A page is a constant number of queries whatever the archive's size: the page's slices
(keyset on the slice key, which sorts as its local start minute), one aggregate for their
message counts, one query for their evolution runs, one for which have a card snapshot.
"""

from collections import defaultdict

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from memory.models import CardSnapshot, EvolutionRun, Slice
from memory.models.archive import is_slice_key
from previously.pages.current_profile import current_profile

PAGE_SIZE = 20


def timeline_page(profile, *, before: str = "") -> tuple[list[tuple[str, list[Slice]]], str]:
    """[(local day, [slices newest first])] for one page, and the key to continue from."""
    slices = Slice.objects.for_profile(profile)
    if before:
        slices = slices.filter(key__lt=before)
    keys = list(slices.order_by("-key").values_list("pk", flat=True)[: PAGE_SIZE + 1])
    more = len(keys) > PAGE_SIZE
    keys = keys[:PAGE_SIZE]
    rows = list(
        Slice.objects.filter(pk__in=keys).with_line_count().order_by("-key")
    )
    runs: dict[int, list[EvolutionRun]] = defaultdict(list)
    for run in EvolutionRun.objects.filter(slice_id__in=keys).order_by("created_at", "id").defer(
        "steps", "card_before", "card_after"
    ):
        runs[run.slice_id].append(run)
    snapshots = set(CardSnapshot.objects.filter(slice_id__in=keys).values_list("slice_id", flat=True))
    days: dict[str, list[Slice]] = {}
    for s in rows:
        s.runs, s.has_snapshot = runs.get(s.pk, []), s.pk in snapshots
        days.setdefault(s.key[:10], []).append(s)
    return list(days.items()), (rows[-1].key if more and rows else "")


@login_required
def timeline(request):
    """Conversations newest first, grouped by the day they started, with their card changes."""
    profile = current_profile(request)
    before = request.GET.get("before", "")
    if before and not is_slice_key(before):
        before = ""
    days, next_before = timeline_page(profile, before=before)
    context = {"profile": profile, "days": days, "next_before": next_before, "paged": bool(before)}
    template = "timeline/timeline.html#days" if request.htmx and not request.htmx.boosted else "timeline/timeline.html"
    return render(request, template, context)

