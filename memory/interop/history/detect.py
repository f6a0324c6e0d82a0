"""Which app made a file, by its content, never its name (SPEC H1).

Each member (the file itself, or each file in a zip) is sniffed from its first bytes:
- a JSON list whose first item has `mapping` (and `current_node`): ChatGPT;
- … whose first item has `chat_messages`: Claude;
- … whose first item has `chat` (an object holding `history` or `messages`): Open WebUI;
- JSON Lines whose first line has `character_name`/`user_name` and `create_date` or
  `chat_metadata`: a SillyTavern chat.
Anything else (ChatGPT's `user.json`, `chat.html`, images) is not a conversation source.
ChatGPT's split `conversations-000.json`, `-001`, … are read in the order of their names.
"""

import json
import re
from dataclasses import dataclass

import ijson
from django.utils.translation import gettext

from memory.interop.history.shapes import APPS
from memory.interop.history.source import Source

SNIFF_EVENTS = 2000  # ijson events looked at before a first item's keys are given up on
APP_NAMES = {"chatgpt": "ChatGPT", "claude": "Claude", "openwebui": "Open WebUI", "sillytavern": "SillyTavern"}
DECISIVE = {"mapping": "chatgpt", "current_node": "chatgpt", "chat_messages": "claude", "chat": "openwebui"}


@dataclass
class Detected:
    app: str
    members: list[str]


def detect(source: Source, wanted: str = "auto") -> Detected:
    """The app and the members to read, in order; `Refused` when nothing (or a mix) is found."""
    found: dict[str, list[str]] = {}
    for member in source.members:
        app = sniff(source, member)
        if app:
            found.setdefault(app, []).append(member)
    if wanted != "auto":
        if wanted not in APPS:
            raise source.refuse(gettext("unknown format %(format)s.") % {"format": repr(wanted)})
        if wanted not in found:
            raise source.refuse(gettext("no %(app)s conversations were found in it.") % {"app": APP_NAMES[wanted]})
        return Detected(wanted, _ordered(found[wanted]))
    if not found:
        raise source.refuse(gettext("it is not a ChatGPT, Claude, Open WebUI or SillyTavern export"
                                    " (no conversations were recognised)."))
    if len(found) > 1:
        raise source.refuse(gettext("it holds conversations of more than one app (%(apps)s); import them one at a time"
                                    " or choose the format.") % {"apps": ", ".join(APP_NAMES[a] for a in sorted(found))})
    app, members = next(iter(found.items()))
    return Detected(app, _ordered(members))


def _ordered(members: list[str]) -> list[str]:
    def natural(name: str):
        return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]
    return sorted(members, key=natural)


def sniff(source: Source, member: str) -> str | None:
    with source.open_member(member) as fh:
        head = fh.read(4096)
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if start == b"[":
        return _first_item_app(source, member)
    if start == b"{":
        return _sillytavern_header(source, member)
    return None


def _first_item_app(source: Source, member: str) -> str | None:
    """The app a list's first item belongs to, from its keys (read as a stream, stopping early).
    A file broken before its first item is decided is not refused here: the reader refuses it
    with the record where it broke."""
    with source.open_member(member) as fh:
        try:
            for n, (prefix, event, value) in enumerate(ijson.parse(fh)):
                if prefix == "item" and event == "map_key" and value in DECISIVE:
                    return DECISIVE[value]
                if (prefix == "item" and event == "end_map") or n > SNIFF_EVENTS:
                    return None
        except (ijson.JSONError, UnicodeDecodeError):
            return None
    return None


def _sillytavern_header(source: Source, member: str) -> str | None:
    with source.open_member(member) as fh:
        line = fh.readline(1024 * 1024)
    try:
        header = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    named = "character_name" in header or "user_name" in header
    if named and ("create_date" in header or "chat_metadata" in header):
        return "sillytavern"
    return None
