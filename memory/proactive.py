"""Proactive messages (SPEC K15), the data side: when the companion may write first, what is
due, the per-day count (with the legacy count), and the one write. No model calls here; the
wording and the delivery live in `previously.chat.proactive`.

Legacy count (LEGACY_KV.md "any other meta_* key", seed 002 v1: 主动消息计数按 profile): the
importer keeps such keys verbatim in `LegacyMeta` (profile set, value = the KV text). The
shapes honoured, for the profile and local day `D` (YYYY-MM-DD):

- `meta_proactiveCount:<profile>:<D>` or `meta_proactive:<profile>:<D>` → an integer as text
  (the shape of issue 6's synthetic dump: ``meta_proactiveCount:owner:2026-10-20 = "2"``);
- `meta_proactiveCount:<profile>` or `meta_proactive:<profile>` (no day in the key) → JSON
  ``{"day"|"date": "D", "count"|"n": <int>}``, or the text ``"D:<int>"`` / ``"D|<int>"``.

Anything else (another day, text that does not parse) counts 0. That count is added to the
day's `ProactiveSend` rows, so a day the old product already used up stays used up.
"""

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from memory.archive import Archived, archive_message, slice_gap
from memory.card import HorizonItem
from memory.card.store import parse_or_empty
from memory.clock import local_clock
from memory.models import Card, LegacyMeta, Message, ProactiveSend, Profile, Slice

LEGACY_PREFIXES = ("meta_proactiveCount:", "meta_proactive:")
# Items past their date by more than this are left to the arrival briefing (K6, K14): the
# reminder is for the day an item falls due, not a backlog of old ones.
DUE_WINDOW_DAYS = 7
_DAY_COUNT = re.compile(r"^\s*(\d{4}-\d{2}-\d{2})\s*[:|]\s*(\d+)\s*$")


@dataclass(frozen=True)
class Due:
    """A Horizon item that fell due, not yet announced."""

    item: HorizonItem
    subject: str
    late: int  # days past its by: date (0: due today)


def horizon_subject(item: HorizonItem) -> str:
    """The occasion's identity: the item at its date (a postponed item is due again later)."""
    digest = hashlib.sha256(item.text.strip().encode()).hexdigest()[:16]
    return f"horizon:{item.by.isoformat()}:{digest}"


def user_tz(profile: Profile) -> str:
    """The person's zone as kept on the profile (settings page, or the browser's at the last
    slice opening), else as their latest slice saw it, else UTC."""
    if profile.tz:
        return profile.tz
    tz = Slice.objects.for_profile(profile).order_by("-started_at").values_list("tz", flat=True).first()
    return tz or "UTC"


def legacy_count(profile: Profile, day: date) -> int:
    """What the old product counted for this profile and day (see the module docstring)."""
    d = day.isoformat()
    keyed = [f"{p}{profile.key}:{d}" for p in LEGACY_PREFIXES]
    bare = [f"{p}{profile.key}" for p in LEGACY_PREFIXES]
    total = 0
    for key, value in LegacyMeta.objects.filter(profile=profile, key__in=keyed + bare).values_list("key", "value"):
        total += _count_in(value, d if key in bare else None)
    return total


def _count_in(value: str, day: str | None) -> int:
    """The count a legacy value holds; `day` set means the key has none and the value must name it."""
    text = (value or "").strip()
    if day is None:
        try:
            return max(int(json.loads(text)), 0)
        except (ValueError, TypeError):
            return 0
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        if str(data.get("day") or data.get("date") or "")[:10] != day:
            return 0
        try:
            return max(int(data.get("count", data.get("n", 0))), 0)
        except (ValueError, TypeError):
            return 0
    m = _DAY_COUNT.match(text)
    return int(m.group(2)) if m and m.group(1) == day else 0


def sent_on(profile: Profile, day: date) -> int:
    """Proactive messages counted for the profile's local day, the legacy count included."""
    return ProactiveSend.objects.filter(profile=profile, day=day).count() + legacy_count(profile, day)


def in_conversation(profile: Profile, now: datetime) -> bool:
    """An open slice with activity within the slice gap: the user is mid-conversation."""
    return Slice.objects.for_profile(profile).open().filter(last_message_at__gte=now - slice_gap()).exists()


def quiet_hours(local: datetime, hours: str | None = None) -> bool:
    """Outside the allowed hours ("8-22": 08:00 to 21:59 local) nobody is written to: the
    profile's own (`hours`, from its quiet hours), else PREVIOUSLY_PROACTIVE_HOURS."""
    spec = (hours or settings.PREVIOUSLY_PROACTIVE_HOURS or "").strip()
    if not spec:
        return False
    start, _, end = spec.partition("-")
    try:
        start_h, end_h = int(start), int(end or 24)
    except ValueError:
        return False  # an unreadable setting never silences the companion; see the README
    if start_h <= end_h:
        return not (start_h <= local.hour < end_h)
    return end_h <= local.hour < start_h  # a window across midnight, e.g. "20-2"


def refusal(profile: Profile, *, now: datetime, local: datetime, present: bool = False) -> str | None:
    """Why the companion may not write first now, or None when it may (K15). `present`: the
    user has just opened the chat, so quiet hours do not apply."""
    if not profile.proactive_enabled:
        return "switched off"
    if not present and quiet_hours(local, profile.proactive_hours):
        return "quiet hours"
    if in_conversation(profile, now):
        return "mid-conversation"
    if sent_on(profile, local.date()) >= settings.PREVIOUSLY_PROACTIVE_PER_DAY:
        return "daily limit reached"
    return None


def due_items(profile: Profile, *, today: date) -> list[Due]:
    """Horizon items of the live card that fell due (by: reached, at most DUE_WINDOW_DAYS ago)
    and were not announced yet, the most recent first."""
    row = Card.objects.filter(profile=profile).values_list("text", flat=True).first()
    card = parse_or_empty(row or "")
    found = []
    for item in card.horizon:
        late = (today - item.by).days
        if 0 <= late <= DUE_WINDOW_DAYS:
            found.append(Due(item=item, subject=horizon_subject(item), late=late))
    if not found:
        return []
    announced = set(
        ProactiveSend.objects.filter(profile=profile, subject__in=[d.subject for d in found])
        .values_list("subject", flat=True)
    )
    return sorted((d for d in found if d.subject not in announced), key=lambda d: (d.late, d.item.text))


def announced(profile: Profile, subject: str) -> bool:
    return ProactiveSend.objects.filter(profile=profile, subject=subject).exists()


def record_proactive(
    *, profile: Profile, mid: str, reason: str, subject: str, content: str, now: datetime, tz: str,
    present: bool = False,
) -> Archived | None:
    """Archive a message the companion wrote first (speaker assistant, message_type proactive)
    and count it, in one transaction; None when the occasion was already announced, or when
    the limit, the switch or a conversation started meanwhile forbid it (checked again under
    the profile's lock, so two checks racing send one message)."""
    local = local_clock(now, tz).local
    with transaction.atomic():
        if connection.features.has_select_for_update:
            Profile.objects.select_for_update().filter(pk=profile.pk).first()
        profile.refresh_from_db(fields=["proactive_enabled"])
        if refusal(profile, now=now, local=local, present=present) is not None:
            return None
        try:
            with transaction.atomic():
                send = ProactiveSend.objects.create(
                    profile=profile, day=local.date(), reason=reason, subject=subject, created_at=now
                )
        except IntegrityError:
            return None  # announced already (another pass or process)
        archived = archive_message(
            profile=profile, mid=mid, speaker=Message.Speaker.ASSISTANT, content=content,
            message_type=Message.Type.PROACTIVE, created_at=now, tz=tz,
        )
        send.message = archived.message
        send.save(update_fields=["message"])
    return archived


def last_message(profile: Profile) -> Message | None:
    """The profile's latest live line (for the return-after-a-gap check)."""
    return Message.objects.for_profile(profile).live().order_by("-created_at", "-id").first()


def away_for(profile: Profile, now: datetime) -> tuple[Message, timedelta] | None:
    """The last line and how long ago it was, or None for a profile with no lines yet."""
    last = last_message(profile)
    return (last, now - last.created_at) if last is not None else None
