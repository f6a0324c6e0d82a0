"""SillyTavern chats: one `.jsonl` file per chat (or several in a zip), a header line
(`user_name`, `character_name`, `create_date`, `chat_metadata`) and then one message per line
(`name`, `is_user`, `is_system`, `send_date`, `mes`, `swipes`, `swipe_id`, `swipe_info`,
`extra`).

What we learned from SillyTavern's code and chats found in the wild: `mes` is the chosen swipe
(`swipes[swipe_id]`); `swipe_info[i].send_date` dates each swipe; a hidden message (`/hide`)
and the app's notices are `is_system`; a narrator message (`/sys`) has `extra.type` =
"narrator"; a reply's reasoning is `extra.reasoning`; a picture sent with a message is
`extra.image` (a path on the SillyTavern server, not in the chat file: counted as an image
missing); `send_date` is ISO 8601 in newer versions, epoch milliseconds in old ones, and text
such as "June 14, 2025 6:22pm" in between — the person's wall clock, read in the companion's
zone. Messages have no ids: a line's key is its `send_date` and speaker, numbered among the
lines that share both, so a message deleted in SillyTavern does not shift the others' mids.
"""

import posixpath
from collections import Counter
from collections.abc import Iterator

from django.utils.translation import gettext

from memory.interop.history import stream
from memory.interop.history.shapes import Alternative, Conversation, Line, Skip
from memory.interop.history.source import Source
from memory.interop.history.times import from_text

APP = "sillytavern"


def read(source: Source, members: list[str], zone) -> Iterator[Conversation]:
    for member in members:
        yield chat(source, member, zone)


def chat(source: Source, member: str, zone) -> Conversation:
    records = stream.jsonl(source, member)
    first = next(records, None)
    label = source.label(member)
    if first is None:
        raise source.refuse(gettext("the chat is empty."), record=label)
    _record, header = first
    character = header.get("character_name") if isinstance(header.get("character_name"), str) else ""
    created = header.get("create_date")
    key = f"{character}\x1f{created}"
    conv = Conversation(app=APP, key=key, title=character[:200], record=label)
    at = from_text(created, zone)
    seen: Counter = Counter()
    last_user: Line | None = None
    for record, message in records:
        if message.get("is_system"):
            conv.skipped[Skip.SYSTEM] += 1
            continue
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
        if extra.get("type") == "narrator":
            conv.skipped[Skip.NARRATION] += 1
            continue
        if extra.get("reasoning"):
            conv.skipped[Skip.REASONING] += 1
        text = message.get("mes")
        text = text if isinstance(text, str) and text.strip() else ""
        image = extra.get("image")
        images = [f"sillytavern:{posixpath.basename(image)[:80]}"] if isinstance(image, str) and image else []
        if not text and not images:
            conv.skipped[Skip.EMPTY] += 1
            continue
        at = from_text(message.get("send_date"), zone) or at
        if at is None:
            raise source.refuse(gettext("a message has no time and neither has its chat."), record=record)
        speaker = "user" if message.get("is_user") else "assistant"
        stamp = f"{message.get('send_date')}\x1f{speaker}"
        if not text:  # a picture alone: counted missing, never a row; the lines after it keep their keys
            conv.lines.append(Line(key=f"{stamp}\x1fpicture", speaker=speaker, text="", at=at, images=images))
            continue
        key = f"{stamp}\x1f{seen[stamp]}"
        seen[stamp] += 1
        line = Line(key=key, speaker=speaker, text=text, at=at, images=images)
        _swipes(message, line, conv, zone, answers=last_user)
        conv.lines.append(line)
        last_user = line if speaker == "user" else None
    return conv


def _swipes(message: dict, line: Line, conv: Conversation, zone, *, answers: Line | None) -> None:
    """The unchosen swipes: alternatives of a reply to a user line, else counted (a greeting's
    swipes are its alternate greetings: the character card's business)."""
    swipes = message.get("swipes")
    if not isinstance(swipes, list) or len(swipes) < 2:
        return
    chosen = message.get("swipe_id") if isinstance(message.get("swipe_id"), int) else 0
    info = message.get("swipe_info") if isinstance(message.get("swipe_info"), list) else []
    for i, text in enumerate(swipes):
        if i == chosen or not isinstance(text, str) or not text.strip():
            continue
        if answers is None or line.speaker != "assistant":
            conv.skipped[Skip.BRANCH] += 1
            continue
        meta = info[i] if i < len(info) and isinstance(info[i], dict) else {}
        at = from_text(meta.get("send_date"), zone) or line.at
        line.alternatives.append(Alternative(key=f"{line.key}\x1fswipe{i}", text=text, at=at))
