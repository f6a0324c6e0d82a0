"""Streamed JSON for the readers (SPEC S4): one conversation built at a time.

`items(source, member)` yields each item of a member's top-level JSON list, built by ijson's
C backend, so memory follows the largest conversation, not the file. `jsonl(source, member)`
yields each line of a JSON Lines member. Malformed JSON, text that is not UTF-8, an escaped lone
surrogate, a top level that is not a list: each is a `Refused` naming the file and the record
where it stopped ("conversations.json[12]", "chat.jsonl line 7"). So is a string longer than
any the import takes (`longest_token()` bytes, or what the reader allows: Open WebUI's data:
URLs), before the parser is handed it (S4).
"""

import json
from collections.abc import Iterator

import ijson
from django.conf import settings
from django.utils.translation import gettext

from memory import limits
from memory.interop.history.source import Source
from memory.interop.json_stream import CHUNK, BadFile, _SurrogateCheck, _TooLong, longest_token


def _problem(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError) or "UTF8" in str(exc) or "utf-8" in str(exc).lower():
        return gettext("the text is not UTF-8.")
    raw = exc.args[0] if exc.args else exc
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    first = (str(raw).strip().splitlines() or ["malformed"])[0]
    return gettext("the JSON is invalid or cut short (%(error)s).") % {"error": first[:200]}


def items(source: Source, member: str, *, longest: int | None = None) -> Iterator[tuple[str, object]]:
    """(record name, item) for each item of the member's top-level list (the caller has
    checked, by `detect`, that the top level is a list); no string may be longer than
    `longest` bytes (default `longest_token()`)."""
    name = source.label(member) or source.name
    at = -1
    bound = longest or longest_token()
    with source.open_member(member) as fh:
        try:
            for at, item in enumerate(ijson.items(_SurrogateCheck(fh, longest=bound), "item", use_float=True,
                                                  buf_size=CHUNK)):
                yield f"{name}[{at}]", item
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise source.refuse(_problem(exc), record=f"{name}[{at + 1}]") from None
        except BadFile as exc:
            raise source.refuse(str(exc), record=f"{name}[{at + 1}]") from None
        except _TooLong:
            raise source.refuse(gettext(
                "a string runs past %(bytes)s bytes, longer than any the import takes (a message may have"
                " %(chars)s characters, %(setting)s; an image %(image)s bytes, PREVIOUSLY_IMAGE_MAX_BYTES).") % {
                "bytes": f"{bound:,}", "chars": f"{limits.MESSAGE.chars:,}", "setting": limits.MESSAGE.setting,
                "image": f"{settings.PREVIOUSLY_IMAGE_MAX_BYTES:,}"},
                record=f"{name}[{at + 1}]") from None


def jsonl(source: Source, member: str) -> Iterator[tuple[str, dict]]:
    """(record name, object) for each non-blank line of a JSON Lines member."""
    name = source.label(member) or source.name
    with source.open_member(member) as fh:
        for number, raw in enumerate(fh, 1):
            record = gettext("%(file)s line %(line)s") % {"file": name, "line": number}
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
                value = json.loads(text)
            except UnicodeDecodeError as exc:
                raise source.refuse(_problem(exc), record=record) from None
            except json.JSONDecodeError as exc:
                raise source.refuse(gettext("the line is not JSON (%(error)s).") % {"error": exc.msg}, record=record) from None
            if not isinstance(value, dict):
                raise source.refuse(gettext("the line is not a JSON object."), record=record)
            yield record, value
