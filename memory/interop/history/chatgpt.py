"""ChatGPT's data export (Settings → Data controls → Export): `conversations.json`, or the
newer `conversations-000.json`, `conversations-001.json`, … read in order as one list.

What we learned from real exports and other importers (Open WebUI's, chatgpt-to-open-webui,
openwebui-importer): the visible conversation is the path from `current_node` up `parent`
to the root; a regenerated reply is a sibling of the chosen one under the same user node, an
edited prompt a sibling user node; custom instructions ride on a hidden *user* message of
content type `user_editable_context` and the memory on a `model_editable_context` one (so
the content type is looked at before the role); an assistant message with a `recipient`
other than `all` is a tool call; images are `image_asset_pointer` parts whose
`asset_pointer` ("file-service://file-…" or "sediment://file_…") names a zip member starting
with that file id.
"""

from collections.abc import Iterator
from datetime import datetime

from django.utils.translation import gettext

from memory.interop.history import stream
from memory.interop.history.shapes import Conversation, Line, Note, Skip
from memory.interop.history.source import Source
from memory.interop.history.times import from_epoch
from memory.interop.history.tree import TreeProblem, read_tree

APP = "chatgpt"
TOOL_TYPES = {"execution_output", "tether_browsing_display", "tether_quote", "system_error", "computer_output",
              "sonic_webpage", "browsing_display"}
REASONING_TYPES = {"thoughts", "reasoning_recap"}
LINE_TYPES = {"text", "multimodal_text", "code"}
# The texts custom instructions and memory carry (older and newer names).
CUSTOM_FIELDS = ("about_user_message", "about_model_message", "user_profile", "user_instructions")
MEMORY_FIELDS = ("model_set_context", "repository", "user_knowledge_memories")


def read(source: Source, members: list[str], zone) -> Iterator[Conversation]:
    for member in members:
        for record, item in stream.items(source, member):
            yield conversation(item, record=record, source=source)


def conversation(item, *, record: str, source: Source) -> Conversation:
    if not isinstance(item, dict):
        raise source.refuse(gettext("a conversation is not a JSON object."), record=record)
    key = item.get("conversation_id") or item.get("id")
    mapping = item.get("mapping")
    current = item.get("current_node")
    if not isinstance(key, str) or not key or not isinstance(mapping, dict) or not isinstance(current, str):
        raise source.refuse(gettext("a conversation lacks its id, mapping or current_node."), record=record)
    title = item.get("title") if isinstance(item.get("title"), str) else ""
    conv = Conversation(app=APP, key=key, title=title[:200], record=record)
    nodes = {k: v for k, v in mapping.items() if isinstance(v, dict)}
    start = from_epoch(item.get("create_time")) or from_epoch(item.get("update_time"))
    try:
        at = read_tree(conv, nodes, current, parent_key="parent", children_key="children", start=start,
                       make=lambda node, c, previous: _message(node.get("message"), c, previous),
                       counts=lambda node: isinstance(node.get("message"), dict))
    except TreeProblem as exc:
        raise source.refuse(f"{exc}.", record=f"{record} ({key})") from None
    if conv.lines and at is None:
        raise source.refuse(gettext("a message has no time and neither has its conversation."), record=f"{record} ({key})")
    return conv


def _message(message, conv: Conversation, previous: datetime | None) -> Line | None:
    """The line a path message makes, or None (counted in `conv.skipped` by kind)."""
    if not isinstance(message, dict):
        return None  # the root's null message
    author = message.get("author") if isinstance(message.get("author"), dict) else {}
    role = author.get("role")
    content = message.get("content") if isinstance(message.get("content"), dict) else {}
    ctype = content.get("content_type")
    metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
    if ctype == "user_editable_context":
        conv.skipped[Skip.CUSTOM_INSTRUCTIONS] += 1
        conv.notes.extend(Note(Skip.CUSTOM_INSTRUCTIONS, content[f]) for f in CUSTOM_FIELDS
                          if isinstance(content.get(f), str) and content[f].strip())
        return None
    if ctype == "model_editable_context":
        conv.skipped[Skip.APP_MEMORY] += 1
        conv.notes.extend(Note(Skip.APP_MEMORY, content[f]) for f in MEMORY_FIELDS
                          if isinstance(content.get(f), str) and content[f].strip())
        return None
    if role == "system":
        conv.skipped[Skip.SYSTEM] += 1
        return None
    if role == "tool" or ctype in TOOL_TYPES or (role == "assistant" and message.get("recipient") not in (None, "all")):
        conv.skipped[Skip.TOOL] += 1
        return None
    if ctype in REASONING_TYPES:
        conv.skipped[Skip.REASONING] += 1
        return None
    if role not in ("user", "assistant"):
        conv.skipped[Skip.OTHER_CONTENT] += 1
        return None
    if metadata.get("is_visually_hidden_from_conversation"):
        conv.skipped[Skip.HIDDEN] += 1
        return None
    if ctype not in LINE_TYPES:
        conv.skipped[Skip.OTHER_CONTENT] += 1
        return None
    text, images = _content(content, ctype)
    if not text and not images:
        conv.skipped[Skip.EMPTY] += 1
        return None
    at = from_epoch(message.get("create_time")) or previous
    return Line(key="", speaker=role, text=text, at=at, images=images)


def _content(content: dict, ctype: str) -> tuple[str, list[str]]:
    if ctype == "code":
        text = content.get("text")
        return (text if isinstance(text, str) else ""), []
    parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    texts = [p for p in parts if isinstance(p, str)]
    images = []
    for p in parts:
        if isinstance(p, dict) and p.get("content_type") == "image_asset_pointer":
            pointer = p.get("asset_pointer")
            if isinstance(pointer, str) and "://" in pointer:
                images.append(pointer.split("://", 1)[1][:100])
    text = "\n".join(texts)
    return (text if text.strip() else ""), images
