"""The card as the pages show it (card, beliefs and slice pages): display sections with each
item's ref links (to the slice page), usage against the limits, and flags (K12)."""

from django.urls import reverse
from django.utils.translation import gettext, ngettext, pgettext, pgettext_lazy

from memory.card import detect_format, flags, limits, parse
from memory.card.format import PERSON_REF
from memory.card.lines import card_lines
from memory.card_corrections import parse_summary
from memory.models import EvolutionRun, Profile
from memory.models.archive import DEFAULT_PROFILE_KEY

# The card's own words stay English (its format, SPEC K1); the pages name its sections and the
# usual identity fields in the interface language.
SECTION_LABELS = {
    "Identity": pgettext_lazy("card section", "Identity"),
    "Past": pgettext_lazy("card section", "Past"),
    "Now": pgettext_lazy("card section", "Now"),
    "Horizon": pgettext_lazy("card section", "Horizon"),
    "Self-model": pgettext_lazy("card section", "Self-model"),
}
IDENTITY_FIELDS = {
    "Name": pgettext_lazy("card identity field", "Name"),
    "Address them as": pgettext_lazy("card identity field", "Address them as"),
    "Pronouns": pgettext_lazy("card identity field", "Pronouns"),
    "Alias": pgettext_lazy("card identity field", "Alias"),
}


def section_label(name: str) -> str:
    return str(SECTION_LABELS.get(name, name))


def run_summary(run) -> str:
    """A card update's summary as the pages show it: a hand edit's (stored in English, K16) in
    the interface language; the agent's as it wrote it."""
    parsed = parse_summary(run.summary) if run.trigger == EvolutionRun.Trigger.HAND else None
    if parsed is None:
        return run.summary
    verb, f = parsed
    if verb == "revert":
        return ngettext(
            "You restored the card as it was at the end of conversation %(slice)s (%(out)s line out, %(into)s in)",
            "You restored the card as it was at the end of conversation %(slice)s (%(out)s lines out, %(into)s in)",
            int(f["out"]),
        ) % f
    if verb == "portrait":
        return gettext("You rewrote the portrait")
    f = {**f, "section": section_label(f["section"])}
    if verb == "removed":
        return gettext("You removed from %(section)s: %(words)s") % f
    if verb == "edited":
        return gettext("You corrected %(section)s: “%(words)s” → “%(new)s”") % f
    return gettext("You added to %(section)s: %(words)s") % f


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
        return {"name": name, "label": section_label(name), "attr": attr, "usage": usage, **extra, "items": items}

    return {
        "format": fmt,
        "header": card.header,
        "sections": [
            section(
                "Identity",
                "identity",
                gettext("%(n)d/%(max)d lines") % {"n": len(card.identity), "max": limits.IDENTITY_MAX_LINES},
                card.identity,
                text=lambda i: f"{IDENTITY_FIELDS.get(i.field, i.field)}: {i.value}",
            ),
            section(
                "Past",
                "facts",
                gettext("%(chars)d/%(max_chars)d characters · %(n)d/%(max)d facts") % {
                    "chars": len(card.portrait), "max_chars": limits.PORTRAIT_MAX_CHARS,
                    "n": len(card.facts), "max": limits.ANCHOR_FACTS_MAX,
                },
                card.facts,
                portrait=card.portrait,
            ),
            section(
                "Now",
                "now",
                f"{len(card.now)}/{limits.NOW_MAX}",
                card.now,
                meta=lambda n: pgettext("a Now item on the card", "since %(date)s") % {"date": n.since.isoformat()},
            ),
            section(
                "Horizon",
                "horizon",
                f"{len(card.horizon)}/{limits.HORIZON_MAX}",
                card.horizon,
                meta=lambda h: pgettext("a Horizon item on the card", "by %(date)s") % {"date": h.by.isoformat()},
            ),
            section(
                "Self-model",
                "lessons",
                gettext("%(n)d/%(max)d lessons") % {"n": len(card.lessons), "max": limits.LESSONS_MAX},
                card.lessons,
            ),
        ],
    }
