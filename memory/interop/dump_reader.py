"""Incremental reader for the two Cloudflare KV dump shapes (LEGACY_KV.md "The dump file")."""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.utils.translation import gettext

from memory.phrases import json_error, shown

CHUNK = 1 << 20
_WS = " \t\r\n"


class DumpFormatError(Exception):
    """The dump is not valid JSON of either shape; `key` names the last key read, if any."""

    def __init__(self, problem: str, *, key: str | None = None, offset: int | None = None):
        self.key = key
        self.problem = problem
        where = gettext("at key %(key)s") % {"key": repr(key)} if key else gettext("at the start of the dump")
        if offset is not None:
            where += gettext(" (character %(n)s)") % {"n": offset}
        super().__init__(gettext("%(where)s: %(problem)s") % {"where": where, "problem": problem})


def _bad_json(problem: str) -> str:
    return gettext("bad JSON: %(problem)s") % {"problem": problem}


@dataclass(slots=True)
class DumpEntry:
    """One key of the namespace as the dump spells it."""

    key: str
    value: Any
    expiration: Any = None
    expiration_ttl: Any = None
    metadata: Any = None
    base64: bool = False
    # Whatever else the entry object carried, kept for the report.
    extra: dict = field(default_factory=dict)
    problem: str = ""  # non-empty: the entry itself is malformed


class _Buffer:
    """A growing text window over the file, so raw_decode can work on pieces."""

    def __init__(self, fh: IO[str]):
        self.fh = fh
        self.text = ""
        self.pos = 0
        self.consumed = 0  # characters dropped from the front
        self.eof = False

    def fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.fh.read(CHUNK)
        if not chunk:
            self.eof = True
            return False
        if self.pos > CHUNK:
            self.consumed += self.pos
            self.text = self.text[self.pos :]
            self.pos = 0
        self.text += chunk
        return True

    def skip_ws(self) -> str:
        """The next non-blank character (not consumed), or '' at the end."""
        while True:
            text, pos = self.text, self.pos
            n = len(text)
            while pos < n and text[pos] in _WS:
                pos += 1
            self.pos = pos
            if pos < n:
                return text[pos]
            if not self.fill():
                return ""

    def offset(self) -> int:
        return self.consumed + self.pos

    def decode(self, decoder: json.JSONDecoder, last_key: str | None) -> Any:
        while True:
            try:
                value, end = decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                # Maybe the value runs past the window: read more and retry; at EOF it is bad.
                if self.fill():
                    continue
                raise DumpFormatError(_bad_json(shown(json_error(exc.msg))), key=last_key, offset=self.offset()) from None
            if end == len(self.text) and not self.eof:
                # A number or literal could continue in the next chunk.
                if self.fill():
                    continue
            self.pos = end
            return value


def read_dump(fh: IO[str]) -> Iterator[DumpEntry]:
    """Yield the entries of a bulk-put array or a bulk-get object, detecting which it is."""
    buf = _Buffer(fh)
    first = buf.skip_ws()
    if first == "[":
        buf.pos += 1
        yield from _read_bulk_put(buf)
    elif first == "{":
        buf.pos += 1
        yield from _read_bulk_get(buf)
    elif first == "":
        raise DumpFormatError(gettext("the file is empty"))
    else:
        raise DumpFormatError(gettext("not a KV dump: expected a JSON array (bulk put) or object (bulk get)"))


def _separator(buf: _Buffer, close: str, last_key: str | None, first: bool) -> bool:
    """Consume ',' between items; True when the closing bracket was reached."""
    ch = buf.skip_ws()
    if ch == close:
        buf.pos += 1
        return True
    if not first:
        if ch != ",":
            problem = (gettext("unexpected end of file") if ch == "" else
                       gettext("expected ',' or %(close)s, found %(found)s") % {"close": repr(close), "found": repr(ch)})
            raise DumpFormatError(_bad_json(problem), key=last_key, offset=buf.offset())
        buf.pos += 1
        ch = buf.skip_ws()
    if ch == "":
        raise DumpFormatError(_bad_json(gettext("unexpected end of file")), key=last_key, offset=buf.offset())
    return False


_NEXT_ITEM = re.compile(r"[ \t\r\n]*,[ \t\r\n]*(?=\{)")


def _read_bulk_put(buf: _Buffer) -> Iterator[DumpEntry]:
    decoder = json.JSONDecoder()
    last_key = None
    first = True
    while True:
        # The common case, `,` and the next object within the window, without the general path.
        m = None if first else _NEXT_ITEM.match(buf.text, buf.pos)
        if m is not None:
            buf.pos = m.end()
        elif _separator(buf, "]", last_key, first):
            break
        first = False
        item = buf.decode(decoder, last_key)
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise DumpFormatError(
                gettext("bad entry: each item of the array must be an object with a string 'key'"),
                key=last_key,
                offset=buf.offset(),
            )
        last_key = item["key"]
        entry = DumpEntry(
            key=last_key,
            value=item.get("value"),
            expiration=item.get("expiration"),
            expiration_ttl=item.get("expiration_ttl"),
            metadata=item.get("metadata"),
            base64=bool(item.get("base64", False)),
            extra={} if item.keys() <= _PUT_FIELDS else {k: v for k, v in item.items() if k not in _PUT_FIELDS},
        )
        if "value" not in item:
            entry.problem = gettext("the entry has no 'value'")
        elif not isinstance(entry.value, str):
            entry.problem = gettext("'value' must be a string")
        yield entry
    _expect_end(buf, last_key)


_PUT_FIELDS = {"key", "value", "expiration", "expiration_ttl", "metadata", "base64"}


def _read_bulk_get(buf: _Buffer) -> Iterator[DumpEntry]:
    decoder = json.JSONDecoder()
    last_key = None
    first = True
    while not _separator(buf, "}", last_key, first):
        first = False
        if buf.skip_ws() != '"':
            raise DumpFormatError(_bad_json(gettext("expected a string key")), key=last_key, offset=buf.offset())
        key = buf.decode(decoder, last_key)
        if buf.skip_ws() != ":":
            raise DumpFormatError(_bad_json(gettext("expected ':' after the key")), key=key, offset=buf.offset())
        buf.pos += 1
        buf.skip_ws()
        raw = buf.decode(decoder, key)
        last_key = key
        if isinstance(raw, dict) and "value" in raw:
            entry = DumpEntry(
                key=key,
                value=raw.get("value"),
                metadata=raw.get("metadata"),
                expiration=raw.get("expiration"),
                base64=bool(raw.get("base64", False)),
            )
        else:
            entry = DumpEntry(key=key, value=raw)
        if isinstance(entry.value, (dict, list)):
            # Some tools print a JSON value already parsed; treat it as its JSON text.
            entry.value = json.dumps(entry.value, ensure_ascii=False)
        elif not isinstance(entry.value, str):
            entry.value = json.dumps(entry.value)
        yield entry
    _expect_end(buf, last_key)


def _expect_end(buf: _Buffer, last_key: str | None) -> None:
    """Only blanks, or wrangler's trailing `Success!` line, may follow the JSON."""
    while buf.fill():
        pass
    rest = buf.text[buf.pos :].strip()
    if rest and rest != "Success!":
        raise DumpFormatError(
            gettext("unexpected text after the JSON: %(text)s") % {"text": repr(rest[:40])}, key=last_key,
            offset=buf.offset()
        )
