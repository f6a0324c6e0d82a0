"""The card as the pages show it (card, beliefs and slice pages): display sections with each
item's ref links (to the slice page), usage against the limits, and flags (K12)."""

from django.urls import reverse

from memory.card import detect_format, flags, limits, parse
from memory.card.format import PERSON_REF
from memory.card.lines import card_lines
from memory.models import Profile
from memory.models.archive import DEFAULT_PROFILE_KEY


def slice_url(profile: Profile, ref: str) -> str:
    """The slice page of `ref` (a slice id like 2026/08/11/1426), for this profile."""
    url = reverse("slice", args=[ref.replace("/", "-")])
    return url if profile.key == DEFAULT_PROFILE_KEY else f"{url}?profile={profile.key}"


def card_sections(profile: Profile, text: str, *, today) -> dict:
    """The card as display sections: items with their ref links, usage and flags."""
    fmt = detect_format(text)
    if fmt != "v5":
        return {"format": fmt, "raw": text}
    card = parse(text)
    flagged = {(f.section, f.index): f for f in flags(card, today=today)}
    lines = {(line.section, line.index): line for line in card_lines(card)}  # K16: edit handles

    def refs(values):
        return [{"ref": r, "url": "" if r == PERSON_REF else slice_url(profile, r)} for r in values]

    def item(section, k, text, values, meta=""):
        flag = flagged.get((section, k))
        line = lines.get((section, k))
        return {"n": k, "text": text, "refs": refs(values), "meta": meta, "flag": flag,
                "key": line.key if line else "", "words": line.words if line else text}

    return {
        "format": fmt,
        "header": card.header,
        "sections": [
            {
                "name": "Identity",
                "attr": "identity",
                "usage": f"{len(card.identity)}/{limits.IDENTITY_MAX_LINES} lines",
                "items": [
                    item("Identity", k, f"{i.field}: {i.value}", i.refs)
                    for k, i in enumerate(card.identity, 1)
                ],
            },
            {
                "name": "Past",
                "attr": "facts",
                "usage": f"{len(card.portrait)}/{limits.PORTRAIT_MAX_CHARS} chars · "
                f"{len(card.facts)}/{limits.ANCHOR_FACTS_MAX} facts",
                "portrait": card.portrait,
                "items": [item("Past", k, f.text, f.refs) for k, f in enumerate(card.facts, 1)],
            },
            {
                "name": "Now",
                "attr": "now",
                "usage": f"{len(card.now)}/{limits.NOW_MAX}",
                "items": [
                    item("Now", k, n.text, n.refs, f"since {n.since.isoformat()}")
                    for k, n in enumerate(card.now, 1)
                ],
            },
            {
                "name": "Horizon",
                "attr": "horizon",
                "usage": f"{len(card.horizon)}/{limits.HORIZON_MAX}",
                "items": [
                    item("Horizon", k, h.text, h.refs, f"by {h.by.isoformat()}")
                    for k, h in enumerate(card.horizon, 1)
                ],
            },
            {
                "name": "Self-model",
                "attr": "lessons",
                "usage": f"{len(card.lessons)}/{limits.LESSONS_MAX} lessons",
                "items": [item("Self-model", k, x.text, x.refs) for k, x in enumerate(card.lessons, 1)],
            },
        ],
    }
