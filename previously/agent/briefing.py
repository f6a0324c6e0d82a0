"""K14: the arrival briefing — on a new slice, greet by the card's name, ask about overdue
Horizon items. The chat adds it to the system prompt on the first turn of a slice. The card's
values in it are quoted (`<<< … >>>`, SPEC R6/S5): it comes after the safety boundary."""

from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext, ngettext

from memory.card import Card
from memory.card.store import live_card, parse_or_empty
from memory.clock import local_clock
from memory.models import Message, Profile, Slice
from memory.prompt_boundary import quote_inline
from previously.i18n import for_profile

_ADDRESS_FIELDS = ("address them as", "称呼")
_NAME_FIELDS = ("name", "名字", "alias")


def arrival_briefing(profile: Profile, slice_: Slice, *, now: datetime | None = None) -> str | None:
    """Instructions for the first reply of a slice, or None when there is nothing to say."""
    # An unsaved slice (A3: the line could not be stored) has no replies yet.
    if slice_.pk is not None and Message.objects.in_slice(slice_).filter(speaker=Message.Speaker.ASSISTANT).exists():
        return None  # not the first turn of this slice any more
    return briefing_text(profile, tz=slice_.tz, now=now)


def briefing_text(profile: Profile, *, tz: str | None, now: datetime | None = None) -> str | None:
    """The briefing itself (name, overdue Horizon items) on the user's clock, or None; also the
    instruction of a welcome-back message written first (K15)."""
    card = parse_or_empty(live_card(profile).text)
    today = local_clock(now or timezone.now(), tz).local.date()
    name = _field(card, _NAME_FIELDS)
    address = _field(card, _ADDRESS_FIELDS)
    overdue = [
        (item, (today - item.by).days) for item in card.horizon if (today - item.by).days > 0
    ]
    if not name and not overdue:
        return None
    with for_profile(profile):
        lines = [gettext("Arrival briefing (a new conversation starts):")]
        if name and address:
            lines.append(gettext("- Greet them by name, %(name)s (address them as: %(address)s).") % {
                "name": quote_inline(name), "address": quote_inline(address)})
        elif name:
            lines.append(gettext("- Greet them by name, %(name)s.") % {"name": quote_inline(name)})
        if overdue:
            lines.append(gettext("- These commitments are past their date; ask naturally how they went:"))
            for item, late in overdue:
                lines.append("  - " + ngettext(
                    "%(text)s (by %(date)s, %(days)d day overdue)",
                    "%(text)s (by %(date)s, %(days)d days overdue)", late,
                ) % {"text": quote_inline(item.text), "date": item.by, "days": late})
    return "\n".join(lines)


def _field(card: Card, names: tuple[str, ...]) -> str:
    for wanted in names:
        for line in card.identity:
            if line.field.casefold() == wanted:
                return line.value
    return ""
