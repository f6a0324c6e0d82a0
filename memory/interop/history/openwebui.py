"""Open WebUI's "Export all chats" (Settings → Chats): a JSON list of chats, each with `id`,
`title`, `chat` (`messages`, and the tree `history.messages`: id → {id, parentId,
childrenIds, role, content, timestamp} with `history.currentId`), `created_at`, `updated_at`.

What we learned from Open WebUI's own code and exports: the flat `chat.messages` is the path
the person last saw, the tree holds every regenerated reply and edited prompt; a regenerated
reply is another assistant child of the same user message; times are epoch seconds (some
builds write milliseconds); an assistant message that failed keeps its `error` beside an
empty or partial `content`; the chat's system prompt is `chat.params.system` (or
`chat.system`); a message's pictures are its `files` of type "image" with a `url` (a
`data:image/…;base64,…` URL, as the browser read the file, or the server's
`/api/v1/files/…` address), and some builds and converters keep them as `images` (data: URLs,
or Ollama's bare base64).

A picture held in a data: URL is in the file, so it is found (SPEC A7, issue 27 point 2): it
becomes an image message, checked and re-encoded by the writer as a zip member is. One over
PREVIOUSLY_IMAGE_MAX_BYTES (judged from the URL's length, before decoding) or whose header
names more than PREVIOUSLY_IMAGE_MAX_PIXELS, one that is not base64, or whose bytes are no
JPEG, PNG, GIF or WebP, is counted missing and by its kind (`Skip.IMAGE_TOO_LARGE`,
`Skip.IMAGE_REFUSED`); its message's text is kept. The pixels themselves are decoded once,
when the writer checks the image (a damaged one then turns from found to missing, as a
damaged zip member does). A server address is counted missing (the export holds no file).
The stream lets a string as long as a data URL of twice the image limit through
(`inline_bound`), so an image somewhat over it is counted, not the whole file refused.
"""

import base64
import binascii
import io
from collections.abc import Iterator

from django.conf import settings
from django.utils.translation import gettext
from PIL import Image, UnidentifiedImageError

from memory.images import FORMATS, pixel_budget
from memory.interop.history import stream
from memory.interop.history.shapes import Conversation, InlineImage, Line, Skip
from memory.interop.history.source import Source
from memory.interop.history.times import from_epoch
from memory.interop.history.tree import TreeProblem, read_tree

APP = "openwebui"
DATA_HEAD = 256  # the most characters a data: URL's header ("data:image/png;base64,") may take
NAME_MAX = 200


def inline_bound() -> int:
    """The longest string the stream lets through for Open WebUI: a data: URL of an image
    twice PREVIOUSLY_IMAGE_MAX_BYTES (4 characters per 3 bytes), or the longest text."""
    return max(stream.longest_token(), 2 * (4 * (settings.PREVIOUSLY_IMAGE_MAX_BYTES // 3 + 1) + DATA_HEAD))


def read(source: Source, members: list[str], zone) -> Iterator[Conversation]:
    for member in members:
        for record, item in stream.items(source, member, longest=inline_bound()):
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
    images = _images(node, conv)
    if not text and not images:
        if not node.get("error"):
            conv.skipped[Skip.EMPTY] += 1
        return None
    at = from_epoch(node.get("timestamp")) or previous
    return Line(key="", speaker=role, text=text, at=at, images=images)


def _images(node: dict, conv: Conversation) -> list[str | InlineImage]:
    """The images a message showed: its `files` of type "image" and its `images`, each once.
    A data: URL (or a bare base64 payload in `images`) is decoded here: an `InlineImage`, or,
    refused, a name no zip member has (counted missing) and its kind counted. A server address
    is such a name too: the export holds no image member."""
    urls: list[tuple[str, str]] = []  # (url, name)
    for item in node.get("files") or []:
        if isinstance(item, dict) and item.get("type") == "image":
            url = item.get("url") or item.get("id") or ""
            urls.append((url if isinstance(url, str) else str(url), _name(item.get("name"))))
    for item in node.get("images") or []:
        url = item.get("url") if isinstance(item, dict) else item
        if isinstance(url, str) and url:
            urls.append((url if url.startswith("data:") or _address(url) else f"data:;base64,{url}", "image"))
    found: list[str | InlineImage] = []
    seen: set[str] = set()
    for url, name in urls:
        if url in seen:
            continue
        seen.add(url)
        if not url.startswith("data:"):
            found.append(f"openwebui:{url[:90]}")  # a ':' no zip member's name has: never found
            continue
        image, problem = _inline(url, name)
        if image is not None:
            found.append(image)
        else:
            conv.skipped[problem] += 1
            found.append(f"openwebui:{url[:40]}")
    return found


def _address(url: str) -> bool:
    return "://" in url[:DATA_HEAD] or url.startswith(("/api/", "blob:"))


def _name(value) -> str:
    return value[:NAME_MAX] if isinstance(value, str) and value.strip() else "image"


def _inline(url: str, name: str) -> tuple[InlineImage | None, str]:
    """A data: URL's image, or (None, the Skip kind it is refused as). Its size is judged from
    its length before anything is decoded; its type from its bytes, never its header (S4)."""
    comma = url.find(",", 0, DATA_HEAD)
    params = url[5:comma].lower().split(";") if comma > 0 else []
    if "base64" not in params[1:]:
        return None, Skip.IMAGE_REFUSED  # no header, or percent-encoded text (an SVG, say)
    length = len(url) - comma - 1
    size = length // 4 * 3 - (2 if url.endswith("==") else 1 if url.endswith("=") else 0)
    if size > settings.PREVIOUSLY_IMAGE_MAX_BYTES:
        return None, Skip.IMAGE_TOO_LARGE
    try:
        data = base64.b64decode(url[comma + 1:], validate=True)
    except (binascii.Error, ValueError):
        return None, Skip.IMAGE_REFUSED
    try:
        with Image.open(io.BytesIO(data)) as probe:  # the header only: no pixel is decoded here
            kind, (width, height) = probe.format, probe.size
    except Image.DecompressionBombError:
        return None, Skip.IMAGE_TOO_LARGE
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return None, Skip.IMAGE_REFUSED
    if kind not in FORMATS:
        return None, Skip.IMAGE_REFUSED
    if width * height > pixel_budget()[0]:
        return None, Skip.IMAGE_TOO_LARGE
    return InlineImage(data=data, name=name), ""
