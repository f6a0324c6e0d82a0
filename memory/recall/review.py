"""Which experiences an evolution run reviews (issue 19): recall's picking, bounded.

The experiences still valid (C5) that cite a line of the slice come first; then those sharing
the most words with the slice (the recall analyser, weighted down for long texts), newest first
on ties; at most `limit`. The agent sees only these, so a run's cost does not grow with memory.
"""

import math

from memory.models import Experience, Message, Slice
from memory.recall.tokenize import tokenize

REVIEW_LIMIT = 8
POOL = 400  # the newest valid experiences looked at by words


def experiences_for_review(slice_: Slice, *, limit: int = REVIEW_LIMIT) -> list[Experience]:
    """The valid active/candidate experiences sharing sources or words with `slice_`, best first."""
    valid = (
        Experience.objects.for_profile(slice_.profile_id)
        .valid()
        .filter(status__in=[Experience.Status.ACTIVE, Experience.Status.CANDIDATE])
    )
    cited = list(valid.filter(source_links__message__slice=slice_).distinct().order_by("-recorded_at", "-id")[:limit])
    words = set()
    for text in Message.objects.in_slice(slice_).live().values_list("content", flat=True):
        words.update(tokenize(text))
    scored = []
    if words and len(cited) < limit:
        pool = valid.exclude(pk__in=[e.pk for e in cited]).order_by("-recorded_at", "-id")[:POOL]
        for position, experience in enumerate(pool):
            doc = set(tokenize(f"{experience.title} {experience.content}"))
            overlap = len(doc & words)
            if overlap:
                scored.append((-(overlap / math.sqrt(len(doc))), position, experience))
        scored.sort(key=lambda s: (s[0], s[1]))
    return cited + [e for _, _, e in scored[: limit - len(cited)]]
