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

    def section(name, attr, usage, entries, text=lambda x: x.text, meta=lambda x: "", **extra):
        items = [item(name, k, text(x), x.refs, meta(x)) for k, x in enumerate(entries, 1)]
        return {"name": name, "attr": attr, "usage": usage, **extra, "items": items}

    return {
        "format": fmt,
        "header": card.header,
        "sections": [
            section(
                "Identity",
                "identity",
                f"{len(card.identity)}/{limits.IDENTITY_MAX_LINES} lines",
                card.identity,
                text=lambda i: f"{i.field}: {i.value}",
            ),
            section(
                "Past",
                "facts",
                f"{len(card.portrait)}/{limits.PORTRAIT_MAX_CHARS} chars · "
                f"{len(card.facts)}/{limits.ANCHOR_FACTS_MAX} facts",
                card.facts,
                portrait=card.portrait,
            ),
            section(
                "Now",
                "now",
                f"{len(card.now)}/{limits.NOW_MAX}",
                card.now,
                meta=lambda n: f"since {n.since.isoformat()}",
            ),
            section(
                "Horizon",
                "horizon",
                f"{len(card.horizon)}/{limits.HORIZON_MAX}",
                card.horizon,
                meta=lambda h: f"by {h.by.isoformat()}",
            ),
            section("Self-model", "lessons", f"{len(card.lessons)}/{limits.LESSONS_MAX} lessons", card.lessons),
        ],
    }
