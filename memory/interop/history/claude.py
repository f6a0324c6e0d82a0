"""Claude's export (Settings → Privacy → Export data): `conversations.json`, a list of
conversations with `uuid`, `name`, `created_at` and `chat_messages` in order.

What we learned from real exports and other parsers (conversation_to_md, polylogue, several
Claude-to-Markdown converters): `sender` is `human` or `assistant`; `text` is what the
conversation showed, while `content` repeats it in blocks beside `thinking`, `tool_use` and
`tool_result` blocks; `attachments` carry `extracted_content` (the text of a pasted or
uploaded file), `files` only names (an uploaded image: its bytes are not in the export). Times
are ISO 8601 with `Z`. Every message's `text` is a line; the other blocks and the attachments'
text are counted, and the files (and attachments without their text) are counted as images
missing.
"""

from collections.abc import Iterator

from django.utils.translation import gettext

from memory.interop.history import stream
from memory.interop.history.shapes import Conversation, Line, Skip
from memory.interop.history.source import Source
from memory.interop.history.times import from_text

APP = "claude"
SPEAKERS = {"human": "user", "assistant": "assistant"}


def read(source: Source, members: list[str], zone) -> Iterator[Conversation]:
    for member in members:
        for record, item in stream.items(source, member):
            yield conversation(item, record=record, source=source, zone=zone)


def conversation(item, *, record: str, source: Source, zone) -> Conversation:
    if not isinstance(item, dict) or not isinstance(item.get("uuid"), str) or not item["uuid"]:
        raise source.refuse(gettext("a conversation lacks its uuid."), record=record)
    messages = item.get("chat_messages")
    if not isinstance(messages, list):
        raise source.refuse(gettext("a conversation's chat_messages is not a list."), record=record)
    title = item.get("name") if isinstance(item.get("name"), str) else ""
    conv = Conversation(app=APP, key=item["uuid"], title=title[:200], record=record)
    at = from_text(item.get("created_at"), zone)
    for position, message in enumerate(messages):
        where = f"{record}.chat_messages[{position}]"
        if not isinstance(message, dict):
            raise source.refuse(gettext("a message is not a JSON object."), record=where)
        for block in message.get("content") or []:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in ("thinking", "redacted_thinking"):
                conv.skipped[Skip.REASONING] += 1
            elif kind in ("tool_use", "tool_result"):
                conv.skipped[Skip.TOOL] += 1
        for attachment in message.get("attachments") or []:
            if isinstance(attachment, dict) and attachment.get("extracted_content"):
                conv.skipped[Skip.ATTACHMENT_TEXT] += 1
        speaker = SPEAKERS.get(message.get("sender"))
        if speaker is None:
            conv.skipped[Skip.SYSTEM] += 1
            continue
        text = message.get("text")
        text = text if isinstance(text, str) and text.strip() else ""
        images = files(message)
        if not text and not images:
            conv.skipped[Skip.EMPTY] += 1
            continue
        at = from_text(message.get("created_at"), zone) or at
        if at is None:
            raise source.refuse(gettext("a message has no time and neither has its conversation."), record=where)
        key = message.get("uuid") if isinstance(message.get("uuid"), str) and message["uuid"] else f"#{position}"
        conv.lines.append(Line(key=key, speaker=speaker, text=text, at=at, images=images))
    return conv


def files(message: dict) -> list[str]:
    """The files a message showed, by name: its `files` (and newer exports' `files_v2`: uploaded
    images) and the `attachments` whose text the export does not hold. The export's archive
    holds none of their bytes, so each is an image counted missing unless a member of that name
    is there."""
    names: list[str] = []
    listed = [*(message.get("files") or []), *(message.get("files_v2") or [])]
    attached = [a for a in message.get("attachments") or [] if isinstance(a, dict) and not a.get("extracted_content")]
    for item in [*listed, *attached]:
        if not isinstance(item, dict):
            continue
        name = item.get("file_name") or item.get("file_uuid")
        if isinstance(name, str) and name and name[:100] not in names:
            names.append(name[:100])
    return names
