"""Open WebUI's "Export all chats" (Settings → Chats): a JSON list of chats, each with `id`,
`title`, `chat` (`messages`, and the tree `history.messages`: id → {id, parentId,
childrenIds, role, content, timestamp} with `history.currentId`), `created_at`, `updated_at`.

What we learned from Open WebUI's own code and exports: the flat `chat.messages` is the path
the person last saw, the tree holds every regenerated reply and edited prompt; a regenerated
reply is another assistant child of the same user message; times are epoch seconds (some
builds write milliseconds); an assistant message that failed keeps its `error` beside an
empty or partial `content`; the chat's system prompt is `chat.params.system` (or
`chat.system`); a message's pictures are its `files` of type "image" (`url`: a data: URL or
the server's file address), counted as images missing.
"""

from collections.abc import Iterator

from django.utils.translation import gettext

from memory.interop.history import stream
from memory.interop.history.shapes import Conversation, Line, Skip
from memory.interop.history.source import Source
from memory.interop.history.times import from_epoch
from memory.interop.history.tree import TreeProblem, read_tree

APP = "openwebui"


def read(source: Source, members: list[str], zone) -> Iterator[Conversation]:
    for member in members:
        for record, item in stream.items(source, member):
            yield conversation(item, record=record, source=source)


def conversation(item, *, record: str, source: Source) -> Conversation:
    chat = item.get("chat") if isinstance(item, dict) else None
    if not isinstance(chat, dict) or not isinstance(item.get("id"), str) or not item["id"]:
        raise source.refuse(gettext("a chat lacks its id or its chat."), record=record)
    title = item.get("title") or chat.get("title") or ""
    conv = Conversation(app=APP, key=item["id"], title=str(title)[:200], record=record)
    params = chat.get("params") if isinstance(chat.get("params"), dict) else {}
    if (isinstance(params.get("system"), str) and params["system"].strip()) or (
            isinstance(chat.get("system"), str) and chat["system"].strip()):
        conv.skipped[Skip.SYSTEM_PROMPT] += 1
    history = chat.get("history") if isinstance(chat.get("history"), dict) else {}
    nodes = history.get("messages") if isinstance(history.get("messages"), dict) else {}
    nodes = {k: v for k, v in nodes.items() if isinstance(v, dict)}
    current = history.get("currentId")
    if not isinstance(current, str):
        if nodes:
            raise source.refuse(gettext("a chat's history has no currentId."), record=record)
        return conv

    try:
        at = read_tree(conv, nodes, current, parent_key="parentId", children_key="childrenIds", make=_message,
                       start=from_epoch(item.get("created_at")))
    except TreeProblem as exc:
        raise source.refuse(f"{exc}.", record=f"{record} ({item['id']})") from None
    if conv.lines and at is None:
        raise source.refuse(gettext("a message has no time and neither has its chat."), record=record)
    return conv


def _message(node: dict, conv: Conversation, previous) -> Line | None:
    role = node.get("role")
    if node.get("error"):
        conv.skipped[Skip.ERROR] += 1
    if role == "system":
        conv.skipped[Skip.SYSTEM] += 1
        return None
    if role not in ("user", "assistant"):
        conv.skipped[Skip.OTHER_CONTENT] += 1
        return None
    text = node.get("content")
    text = text if isinstance(text, str) and text.strip() else ""
    images = _images(node)
    if not text and not images:
        if not node.get("error"):
            conv.skipped[Skip.EMPTY] += 1
        return None
    at = from_epoch(node.get("timestamp")) or previous
    return Line(key="", speaker=role, text=text, at=at, images=images)


def _images(node: dict) -> list[str]:
    """The images a message showed (`files` of type "image", by their `url`: a data: URL or
    the server's /api/v1/files/… address). The export holds no image member, and inline data:
    URLs are not decoded, so each is counted missing."""
    found = []
    for item in node.get("files") or []:
        if isinstance(item, dict) and item.get("type") == "image":
            url = item.get("url") or item.get("id") or ""
            found.append(f"openwebui:{str(url)[:90]}")  # a ':' no zip member's name has: never found
    return found
