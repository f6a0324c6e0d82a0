"""K14: the arrival briefing — on a new slice, greet by the card's name, ask about overdue
Horizon items. The chat adds it to the system prompt on the first turn of a slice."""

from datetime import datetime

from django.utils import timezone

from memory.card import Card
from memory.card.store import live_card, parse_or_empty
from memory.clock import local_clock
from memory.models import Message, Profile, Slice

_ADDRESS_FIELDS = ("address them as", "称呼")
_NAME_FIELDS = ("name", "名字", "alias")


def arrival_briefing(profile: Profile, slice_: Slice, *, now: datetime | None = None) -> str | None:
    """Instructions for the first reply of a slice, or None when there is nothing to say."""
    if Message.objects.in_slice(slice_).filter(speaker=Message.Speaker.ASSISTANT).exists():
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
    zh = profile.language == "zh"
    lines = ["到达简报(新的一段对话刚开始):" if zh else "Arrival briefing (a new conversation starts):"]
    if name:
        how = f"(称呼方式:{address})" if zh and address else (f" (address them as: {address})" if address else "")
        lines.append(f"- 用名字「{name}」问候对方{how}。" if zh else f"- Greet them by name, {name}{how}.")
    if overdue:
        lines.append(
            "- 以下事项已过期限,自然地问问结果如何:"
            if zh
            else "- These commitments are past their date; ask naturally how they went:"
        )
        for item, late in overdue:
            lines.append(
                f"  - {item.text}(期限 {item.by},已逾期 {late} 天)"
                if zh
                else f"  - {item.text} (by {item.by}, {late} day{'s' if late != 1 else ''} overdue)"
            )
    return "\n".join(lines)


def _field(card: Card, names: tuple[str, ...]) -> str:
    for wanted in names:
        for line in card.identity:
            if line.field.casefold() == wanted:
                return line.value
    return ""
