"""The archive (A4): browse and search the profile's whole archive, Chinese and English.

Search goes through the production ranking (`rank_messages`, SPEC R2) for relevance, with
a "newest first" order over the same hits; a date range is applied before ranking, so the
cap never hides a line of the range silently. Beside those exact matches, up to SIMILAR lines
close in meaning (SPEC R8, when embeddings are on). Without a query the archive is browsed
newest first with keyset pagination. Either way a page costs a bounded number of queries, whatever
the archive's size: hits are capped at MAX_HITS and pages are cut from them (bounded offset).
"""

import dataclasses
from datetime import UTC, datetime, time, timedelta

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.shortcuts import render

from memory.models import Message
from memory.recall.rank import DEFAULT_CONFIG, rank_messages, similar_by_meaning
from previously.pages.archive.forms import ArchiveSearchForm
from previously.pages.current_profile import current_profile

PAGE_SIZE = 25
MAX_HITS = 500
SIMILAR = 8
# The production ranking, minus spreading to ±1 neighbours and lines found only by meaning:
# a search result must match (those close in meaning are listed apart).
SEARCH_CONFIG = dataclasses.replace(DEFAULT_CONFIG, n_candidates=MAX_HITS, neighbour_weight=0.0, dense_weight=0.0)


def filtered(profile, *, speaker: str = "", date_from=None, date_to=None):
    """The profile's live lines said by `speaker`, on the user's local days in [from, to].

    Local days are the `local_day_key` column; a ±1 day window on `created_at` lets the
    (profile, created_at) index do the narrowing first. Imported lines without a local day
    fall back to their UTC date."""
    lines = Message.objects.for_profile(profile).live()
    if speaker:
        lines = lines.filter(speaker=speaker)
    if date_from:
        start = datetime.combine(date_from, time.min, tzinfo=UTC)
        lines = lines.filter(created_at__gte=start - timedelta(days=1)).filter(
            Q(local_day_key__gte=date_from.isoformat()) | Q(local_day_key="", created_at__gte=start)
        )
    if date_to:
        end = datetime.combine(date_to + timedelta(days=1), time.min, tzinfo=UTC)
        lines = lines.filter(created_at__lt=end + timedelta(days=1)).filter(
            Q(local_day_key__lte=date_to.isoformat(), local_day_key__gt="") | Q(local_day_key="", created_at__lt=end)
        )
    return lines


def search_page(
    lines, *, profile_id: int, query: str, sort: str, page: int, days: tuple[str, str] | None = None
) -> tuple[list[Message], int, int, set[int]]:
    """One page of hits for `query` among `lines` (`days` narrows the ranking itself):
    (messages, total hits (≤ MAX_HITS), page, every hit's id)."""
    hits = rank_messages(profile_id=profile_id, query=query, limit=MAX_HITS, config=SEARCH_CONFIG, days=days)
    rank = {h.message_id: i for i, h in enumerate(hits)}
    kept = list(lines.filter(id__in=rank).values_list("id", "created_at"))
    if sort == "newest":
        kept.sort(key=lambda row: (row[1], row[0]), reverse=True)
    else:
        kept.sort(key=lambda row: rank[row[0]])
    pages = max(1, -(-len(kept) // PAGE_SIZE))
    page = min(max(page, 1), pages)
    ids = [pk for pk, _ in kept[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]]
    rows = Message.objects.filter(id__in=ids).select_related("slice").in_bulk()
    return [rows[pk] for pk in ids if pk in rows], len(kept), page, {pk for pk, _ in kept}


def similar_lines(lines, *, profile_id: int, query: str, exclude: set[int]) -> list[Message]:
    """Up to SIMILAR lines among `lines` closest in meaning to `query` that are not exact hits."""
    near = [mid for mid, _ in similar_by_meaning(profile_id, query, 4 * SIMILAR)]
    rows = lines.filter(id__in=near).select_related("slice").in_bulk()
    return [rows[mid] for mid in near if mid in rows and mid not in exclude][:SIMILAR]


def browse_page(lines, *, profile, before: str = "") -> tuple[list[Message], str]:
    """Up to PAGE_SIZE lines, newest first, older than the line `before` (keyset on created_at, id);
    and the mid to continue from ('' at the end)."""
    lines = lines.page_from(before, anchors=Message.objects.for_profile(profile))
    rows = list(lines.select_related("slice")[: PAGE_SIZE + 1])
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    return rows, (rows[-1].mid if more and rows else "")


@login_required
def archive(request):
    """Search or browse the archive; each line opens its conversation with the line in view."""
    profile = current_profile(request)
    form = ArchiveSearchForm(request.GET)
    context = {"profile": profile, "form": form, "lines": [], "query": "", "next_before": "", "total": 0}
    if form.is_valid():
        data = form.cleaned_data
        lines = filtered(profile, speaker=data["speaker"], date_from=data["date_from"], date_to=data["date_to"])
        query = data["q"].strip()
        params = request.GET.copy()
        for key in ("page", "before", "profile"):
            params.pop(key, None)
        context.update(query=query, sort=data["sort"] or "relevance", base_query=params.urlencode())
        if query:
            try:
                page = int(request.GET.get("page", "1"))
            except ValueError:
                page = 1
            days = None
            if data["date_from"] or data["date_to"]:
                days = (
                    data["date_from"].isoformat() if data["date_from"] else "0000-00-00",
                    data["date_to"].isoformat() if data["date_to"] else "9999-99-99",
                )
            found, total, page, exact = search_page(
                lines, profile_id=profile.pk, query=query, sort=context["sort"], page=page, days=days
            )
            similar = similar_lines(lines, profile_id=profile.pk, query=query, exclude=exact) if page == 1 else []
            context.update(lines=found, total=total, page=page, pages=max(1, -(-total // PAGE_SIZE)),
                           capped=total >= MAX_HITS, max_hits=MAX_HITS, similar=similar,
                           dated=days is not None)
        else:
            found, next_before = browse_page(lines, profile=profile, before=request.GET.get("before", ""))
            context.update(lines=found, next_before=next_before, browsing=True)
    template = "archive/archive.html#results" if request.htmx and not request.htmx.boosted else "archive/archive.html"
    return render(request, template, context)
