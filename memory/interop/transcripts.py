"""Leaving (SPEC H4): a conversation, or a whole companion, as Markdown and as a SillyTavern chat.

- Markdown: readable; each line with its speaker's name and its time in the person's zone
  (the profile's, else the slice's), one heading per conversation; a reply's alternatives
  (regenerate's "2 / 3") follow it, marked as not chosen.
- SillyTavern `.jsonl` (the format SillyTavern writes and its "Import chat" reads,
  src/endpoints/chats.js): a header line `{user_name, character_name, create_date,
  chat_metadata}`, then one message per line `{name, is_user, is_system, send_date, mes,
  extra}`; a reply with alternatives carries `swipes` (all of them, oldest first),
  `swipe_id` (the chosen one) and `swipe_info`. `send_date` is ISO 8601 in UTC, as
  SillyTavern's own `toISOString()`.

Only what the chat shows is exported: live lines (hidden and deleted ones stay out, the
alternatives of a shown reply excepted), no offline stand-ins (`message_type=system`), no
failed partial replies. Both are generators of text, so a large companion streams out.
"""

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from django.utils.translation import gettext

from memory.clock import is_zone
from memory.images import image_label
from memory.models import Message, Profile, Slice

HIDDEN_TYPES = (Message.Type.SYSTEM,)


def zone_of(profile: Profile, slice_: Slice | None = None) -> ZoneInfo:
    for name in (profile.tz, slice_.tz if slice_ else "", "UTC"):
        if name and is_zone(name):
            return ZoneInfo(name)
    return ZoneInfo("UTC")


def slices_of(profile: Profile, slice_: Slice | None = None) -> Iterable[Slice]:
    if slice_ is not None:
        return [slice_]
    return Slice.objects.for_profile(profile).order_by("started_at", "id").iterator(chunk_size=200)


def conversation(slice_: Slice) -> list[tuple[Message, list[Message]]]:
    """The slice's shown lines, oldest first, each with its alternatives (itself included, oldest
    first) when it has any."""
    lines = list(
        Message.objects.live().in_slice(slice_).exclude(message_type__in=HIDDEN_TYPES)
        .exclude(status=Message.Status.FAILED).order_by("created_at", "id")
    )
    anchors = {m.reply_of_id for m in lines if m.speaker == Message.Speaker.ASSISTANT and m.reply_of_id}
    groups: dict[int, list[Message]] = {}
    if anchors:
        siblings = (
            Message.objects.filter(profile_id=slice_.profile_id, reply_of_id__in=anchors, speaker=Message.Speaker.ASSISTANT)
            .exclude(message_type__in=HIDDEN_TYPES).order_by("created_at", "id")
        )
        for m in siblings:
            groups.setdefault(m.reply_of_id, []).append(m)
    out = []
    for m in lines:
        group = groups.get(m.reply_of_id, []) if m.speaker == Message.Speaker.ASSISTANT and m.reply_of_id else []
        out.append((m, group if len(group) > 1 else []))
    return out


def text_of(message: Message) -> str:
    if message.message_type == Message.Type.IMAGE:
        return image_label(message)
    return message.content


def markdown(profile: Profile, *, person: str, slice_: Slice | None = None) -> Iterator[str]:
    """The conversation (or every conversation of the companion) as Markdown, in pieces."""
    companion = profile.display_name
    zone = zone_of(profile, slice_)
    if slice_ is not None:
        title = gettext("%(companion)s and %(person)s: the conversation of %(start)s") % {
            "companion": companion, "person": person, "start": f"{slice_.started_at.astimezone(zone):%Y-%m-%d %H:%M}"}
    else:
        title = gettext("%(companion)s and %(person)s: every conversation") % {"companion": companion, "person": person}
    yield f"# {_md_inline(title)}\n\n"
    yield "_" + gettext("Exported from Previously on %(date)s. Times are in %(zone)s.") % {
        "date": f"{datetime.now(zone):%Y-%m-%d %H:%M}", "zone": zone.key} + "_\n"
    for s in slices_of(profile, slice_):
        lines = conversation(s)
        if not lines:
            continue
        yield "\n## " + gettext("Conversation of %(start)s") % {"start": f"{s.started_at.astimezone(zone):%Y-%m-%d %H:%M}"} + "\n"
        for message, alternatives in lines:
            who = person if message.speaker == Message.Speaker.USER else companion
            yield f"\n**{_md_inline(who)}** · {message.created_at.astimezone(zone):%Y-%m-%d %H:%M:%S}\n\n{text_of(message)}\n"
            others = [a for a in alternatives if a.pk != message.pk]
            if others:
                yield "\n" + gettext("_Other replies to this line (not chosen):_") + "\n"
                for other in others:
                    yield "\n" + "\n".join(f"> {line}" for line in text_of(other).split("\n")) + "\n"


def _md_inline(text: str) -> str:
    return " ".join(text.split()).replace("*", "\\*").replace("_", "\\_")


def iso_utc(moment: datetime) -> str:
    """SillyTavern's `new Date().toISOString()`: UTC with milliseconds and a Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def humanized(moment: datetime) -> str:
    """SillyTavern's `humanizedISO8601DateTime` for a chat's `create_date`, to the letter:
    month and day unpadded, milliseconds padded only below 10 (2026-12-1 @15h 20m 05s 250ms)."""
    ms = moment.microsecond // 1000
    return (f"{moment.year}-{moment.month}-{moment.day} @{moment:%H}h {moment:%M}m {moment:%S}s "
            f"{'0' if ms < 10 else ''}{ms}ms")


def sillytavern_jsonl(profile: Profile, *, person: str, slice_: Slice | None = None) -> Iterator[str]:
    """The conversation (or the companion's conversations, one after another) as a SillyTavern
    chat file, line by line."""
    companion = profile.display_name
    zone = zone_of(profile, slice_)
    first = slice_ or Slice.objects.for_profile(profile).order_by("started_at", "id").first()
    started = (first.started_at if first else datetime.now(UTC)).astimezone(zone)
    header = {"user_name": person, "character_name": companion, "create_date": humanized(started), "chat_metadata": {}}
    yield json.dumps(header, ensure_ascii=False)
    for s in slices_of(profile, slice_):
        for message, alternatives in conversation(s):
            is_user = message.speaker == Message.Speaker.USER
            line = {
                "name": person if is_user else companion,
                "is_user": is_user,
                "is_system": False,
                "send_date": iso_utc(message.created_at),
                "mes": text_of(message),
                "extra": {},
            }
            if alternatives:
                line["swipes"] = [text_of(a) for a in alternatives]
                line["swipe_id"] = next(i for i, a in enumerate(alternatives) if a.pk == message.pk)
                line["swipe_info"] = [{"send_date": iso_utc(a.created_at), "extra": {}} for a in alternatives]
            yield "\n" + json.dumps(line, ensure_ascii=False)
