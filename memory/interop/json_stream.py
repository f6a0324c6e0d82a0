"""Our export read as it streams (SPEC S4, issue 16 point 2): never the whole file in memory.

An `ExportFile` opens its file anew for each pass. `header()` walks the whole file once
(ijson's events) without building anything but the top level's `format`, `version` and
`exported_at`, so a file that is not JSON, holds more than PREVIOUSLY_IMPORT_MAX_OBJECTS
objects and arrays or nests deeper than PREVIOUSLY_IMPORT_MAX_DEPTH is refused before any
profile is built or checked — both bounds are checked as each object or array opens, and a
refusal (`BadFile`) names where the file stopped, e.g. `profiles[0].messages[1203].legacy_extra`.
`profiles()` then builds one profile at a time (`profiles.item`, ijson's C builder), so
memory is bounded by the largest profile, not the file.

The parser is ijson's C backend (yajl). yajl turns an escaped lone surrogate (`"\\ud800"`)
into `?`; `_SurrogateCheck` refuses such a file first, as text that cannot be stored.

yajl re-reads a token that spans its buffers from the token's start each time more arrives, so
one long string cost the square of its length (issue 24 point 6: 40 MB, a 23.9 s preview; 150 MB,
365 s). The buffers are 1 MB (a text an import takes, PREVIOUSLY_MAX_MESSAGE_CHARS characters,
spans few), and `_SurrogateCheck` refuses a run of more than `longest_token()` bytes without a
quote (a string, or anything else, longer than any text an import takes) before yajl is handed
it; `_Events` names where in the file it was (`profiles[0].messages[12].content`).
"""

import io
import os
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import BinaryIO

import ijson
from django.conf import settings
from django.utils.translation import gettext

from memory import limits

CHUNK = 1024 * 1024
# The top-level members a header pass keeps (anything else there is skipped, never built).
HEADER_MEMBERS = ("format", "version", "exported_at")
STARTS = {"start_map": "end_map", "start_array": "end_array"}


class BadFile(Exception):
    """The upload is not JSON we are willing to parse; the message says why (and where)."""


class _TooLong(Exception):
    """A run without a quote longer than any text an import takes (`_Events` says where)."""


def longest_token() -> int:
    """The most bytes a string of the longest text an import takes can be in a file: every
    character escaped (`\\u0000`, 6 bytes), twice over (a string ending in a backslash hides
    its closing quote from the check), and one read's worth of slack."""
    return 2 * 6 * max(lim.chars for lim in (limits.MESSAGE, limits.PERSONA, limits.FIELD)) + CHUNK


def _too_long(where: str) -> BadFile:
    return BadFile(
        f"That file has a text longer than any an import takes, at {where}: more than"
        f" {longest_token():,} bytes without an end; the longest text is {limits.MESSAGE.chars:,} characters"
        f" ({limits.MESSAGE.setting}). Nothing was written.")


@dataclass
class ProfilePlan:
    """One item of the export's `profiles` as the header pass saw it (issue 24 point 6): its
    members other than the record lists, built (None when the item is not an object), and how
    many records each record list holds; the records themselves are built by `records()`, one
    at a time, never the whole profile."""

    members: dict | None = None
    counts: dict = field(default_factory=dict)


@dataclass
class Header:
    """The top level of an export: its small members, how many profiles it holds (None
    when `profiles` is there but not a list), and each profile's plan."""

    members: dict = field(default_factory=dict)
    profiles: int | None = 0
    plans: list[ProfilePlan] = field(default_factory=list)


class _Again(Exception):
    """The fast walk met something to refuse: the careful walk runs again to say where."""


class ExportFile:
    """An export file read in passes; `open_file` gives a fresh binary file each time.
    `checked` says the records were checked already (the data page's preview of this same
    stored file, memory.interop.previews): the apply then skips its checking pass."""

    def __init__(self, open_file: Callable[[], BinaryIO], *, checked: bool = False):
        self.open_file = open_file
        self.length: int | None = None  # bytes, once the header pass has read them all
        self.stamp: tuple | None = None  # the file the header pass read, where it can say (`_stamp`)
        self.checked = checked

    def header(self, lists: Collection[str] = ()) -> Header:
        """Walk the whole file within the bounds; keep only the top level's small members and,
        per profile, its members other than `lists` (the record lists, counted, not built).
        The walk past what is not built is fast (issue 24 point 6: a careful walk of every event
        of a million records took ~1 µs each); what it meets to refuse is refused by a careful
        walk again, which names where (`profiles[0].messages[1203].legacy_extra`)."""
        try:
            return self._header(lists, fast=True)
        except _Again:
            return self._header(lists, fast=False)

    def _header(self, lists: Collection[str], *, fast: bool) -> Header:
        header, names = Header(), set()
        with self.open_file() as fh:
            stamp = _stamp(fh)
            events = _Events(fh, fast=fast)
            for name, first in events.members():
                _member_name(name, names)
                if name == "profiles" and first == "start_array":
                    header.plans = events.plans(lists)
                    header.profiles = len(header.plans)
                elif name == "profiles":
                    header.profiles = 0 if first == "null" else None
                    events.skip(first)
                elif name in HEADER_MEMBERS:
                    header.members[name] = events.build(first)
                else:
                    events.skip(first)
            self.length = events.source.length
            self.stamp = stamp if stamp is not None and _stamp(fh) == stamp else None
        return header

    def profiles(self) -> Iterator:
        """Each item of the top-level `profiles` list, built one at a time by ijson's C
        builder: `header()` has walked this same file within the bounds first (a file that is
        not the same length then is refused, at its end)."""
        yield from self._items("profiles.item", "a profile")

    def records(self, kind: str, count: int | None = None) -> Iterator:
        """Each record of the list `kind` of every profile, in order, built one at a time by
        ijson's C builder (`header()` has walked this file within the bounds, and counted them).
        Given the `count` the header pass made, the pass ends after that many records while the
        file is still the one the header pass read (`_stamp`): a pass for a short list ends where
        the list does, not at the end of the file (our export lists each profile's lines last:
        a pass over a million-line export took ~2.5 s, issue 24 point 6). A file that cannot say
        (a zip member) is read to its end, where the length is compared."""
        yield from self._items(f"profiles.item.{kind}.item", f"the {kind}", count)

    def _items(self, prefix: str, what: str, count: int | None = None) -> Iterator:
        with self.open_file() as fh:
            self._same_file(fh)
            source = _SurrogateCheck(fh)
            try:
                items = ijson.items(source, prefix, use_float=True, buf_size=CHUNK)
                if count is not None and self.stamp is not None:
                    yield from islice(items, count)
                    self._same_file(fh)
                    return
                yield from items
            except ijson.JSONError as exc:
                raise _syntax(exc, what) from None
            except _TooLong:
                raise _too_long(what) from None
            except UnicodeDecodeError:
                raise BadFile(gettext("That file is not UTF-8 text, so not a JSON export.")) from None
        if self.length is not None and source.length != self.length:
            raise BadFile(gettext("That file changed while it was being read."))

    def _same_file(self, fh: BinaryIO) -> None:
        if self.stamp is not None and _stamp(fh) != self.stamp:
            raise BadFile(gettext("That file changed while it was being read."))


def _stamp(fh: BinaryIO) -> tuple | None:
    """What tells the file apart from another, or from itself changed: its device, inode, size
    and times of change; None for a file without a descriptor (a zip member)."""
    try:
        st = os.fstat(fh.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _member_name(name: str, names, profile: int | None = None) -> None:
    """Refuse a member of the top level (or of profile `profile`) named twice, or with a dot
    (ijson's paths join names with dots: "profiles.item" would pass for one)."""
    quoted = f"{name!r:.40}"
    if name in names:
        raise BadFile(gettext("That file's top level has %(name)s twice.") % {"name": quoted} if profile is None
                      else gettext("That file's profiles[%(n)s] has %(name)s twice.") % {"n": profile, "name": quoted})
    if "." in name:
        raise BadFile(gettext("That file's top level has a member %(name)s; an export's names have no dot.")
                      % {"name": quoted} if profile is None else
                      gettext("That file's profiles[%(n)s] has a member %(name)s; an export's names have no dot.")
                      % {"n": profile, "name": quoted})
    if isinstance(names, set):
        names.add(name)


class _Events:
    """ijson's events for one pass, with the bounds checked and the position kept."""

    def __init__(self, fh: BinaryIO, *, fast: bool = False):
        self.fast = fast  # skip without the bookkeeping; anything amiss raises _Again
        self.max_depth = settings.PREVIOUSLY_IMPORT_MAX_DEPTH
        self.max_containers = settings.PREVIOUSLY_IMPORT_MAX_OBJECTS
        self.containers = 0
        self.stack: list[list] = []  # per open container: [is_array, current key or index]
        self.source = _SurrogateCheck(fh)
        self.events = ijson.basic_parse(self.source, use_float=True, buf_size=CHUNK)
        self.value = None

    def where(self) -> str:
        steps = [f"[{at}]" if is_array else f".{at:.40}" for is_array, at in self.stack if at not in (None, -1)]
        if len(steps) > 10:
            steps = [*steps[:6], f"…({len(steps) - 8} more)…", *steps[-2:]]
        return "".join(steps).lstrip(".") or "the top level"

    def next(self) -> str:
        """The next event's name (its value in `self.value`), bounds checked."""
        try:
            event, self.value = next(self.events)
        except StopIteration:
            raise BadFile(gettext("That file ended before its JSON did.")) from None
        except ijson.JSONError as exc:
            raise _syntax(exc, self.where()) from None
        except _TooLong:
            raise _too_long(self.where()) from None
        except UnicodeDecodeError:
            raise BadFile(_not_utf8(self.where())) from None
        if event == "map_key":
            self.stack[-1][1] = self.value
            return event
        if self.stack and self.stack[-1][0]:
            self.stack[-1][1] += 1  # the next item of an array
        if event in STARTS:
            self.containers += 1
            if self.containers > self.max_containers:
                raise BadFile(gettext("That file holds more than %(limit)s JSON objects and arrays, the limit"
                                      " (PREVIOUSLY_IMPORT_MAX_OBJECTS); it stopped at %(where)s.")
                              % {"limit": f"{self.max_containers:,}", "where": self.where()})
            if len(self.stack) >= self.max_depth:
                raise BadFile(gettext("That file is nested too deeply to be an export (more than %(limit)s levels,"
                                      " PREVIOUSLY_IMPORT_MAX_DEPTH); it stopped at %(where)s.")
                              % {"limit": self.max_depth, "where": self.where()})
            self.stack.append([event == "start_array", -1 if event == "start_array" else None])
        elif event in ("end_map", "end_array"):
            self.stack.pop()
        return event

    def members(self) -> Iterator[tuple[str, str]]:
        """(name, first event of its value) of each top-level member; the caller consumes the
        value (build or skip) before asking for the next. Then the file must end."""
        if self.next() != "start_map":
            raise BadFile(gettext("That file is not a JSON export (its top level is not an object)."))
        while self.next() == "map_key":
            name = self.value
            yield name, self.next()
        try:
            next(self.events)
        except StopIteration:
            return
        except ijson.JSONError as exc:
            raise _syntax(exc, "the end of the file") from None
        raise BadFile(gettext("That file has more after its JSON export."))

    def plans(self, lists: Collection[str]) -> list[ProfilePlan]:
        """Each item of the `profiles` array just opened: an object's members built, except the
        record lists (`lists`), whose items are counted."""
        plans = []
        while (event := self.next()) != "end_array":
            plan = ProfilePlan()
            plans.append(plan)
            if event != "start_map":
                self.skip(event)
                continue
            plan.members = {}
            while self.next() == "map_key":
                name = self.value
                _member_name(name, plan.members.keys() | plan.counts.keys(), len(plans) - 1)
                first = self.next()
                if name in lists and first == "start_array":
                    plan.counts[name] = self.skip(first)
                else:
                    plan.members[name] = self.build(first)
        return plans

    def skip(self, event: str) -> int:
        """Walk past the value that starts with `event` (bounds checked), building nothing;
        how many items it has (an array's) or members (an object's)."""
        if event not in STARTS:
            return 0
        if self.fast:
            return self._skip_fast()
        depth, items = len(self.stack), 0
        while len(self.stack) >= depth:
            event = self.next()
            if len(self.stack) == depth and event not in ("map_key", "end_map", "end_array"):
                items += 1
            elif len(self.stack) == depth + 1 and event in STARTS:
                items += 1
        return items

    def _skip_fast(self) -> int:
        """`skip` with the least work per event; anything to refuse raises _Again."""
        base, nested, items = len(self.stack), 0, 0
        containers, most, deepest = self.containers, self.max_containers, self.max_depth - base
        try:
            for event, _ in self.events:
                if event == "map_key":
                    continue
                if nested == 0 and event != "end_map" and event != "end_array":
                    items += 1
                if event == "start_map" or event == "start_array":
                    containers += 1
                    nested += 1
                    if containers > most or nested > deepest:
                        raise _Again
                elif event == "end_map" or event == "end_array":
                    if nested == 0:
                        break
                    nested -= 1
            else:
                raise _Again  # the file ended inside the value
        except (ijson.JSONError, _TooLong, UnicodeDecodeError):
            raise _Again from None
        self.containers = containers
        self.stack.pop()
        return items

    def build(self, event: str):
        """The value that starts with `event`, built without recursion."""
        if event not in STARTS:
            return self.value
        root: dict | list = {} if event == "start_map" else []
        open_: list[dict | list] = [root]
        key = None
        while open_:
            event = self.next()
            if event == "map_key":
                key = self.value
                continue
            if event in ("end_map", "end_array"):
                open_.pop()
                continue
            value = ({} if event == "start_map" else []) if event in STARTS else self.value
            parent = open_[-1]
            if isinstance(parent, list):
                parent.append(value)
            else:
                parent[key] = value
            if event in STARTS:
                open_.append(value)
        return root


def _syntax(exc: Exception, where: str) -> BadFile:
    raw = exc.args[0] if exc.args else ""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return BadFile(_not_utf8(where))
    first = str(raw).strip().splitlines()[0] if str(raw).strip() else "malformed"
    if "UTF8" in first:
        return BadFile(_not_utf8(where))
    return BadFile(gettext("That file is not a JSON export (%(problem)s; it stopped at %(where)s).")
                   % {"problem": first.rstrip("."), "where": where})


def _not_utf8(where: str) -> str:
    return gettext("That file is not UTF-8 text, so not a JSON export (it stopped at %(where)s).") % {"where": where}


# A run of backslashes, then u and a surrogate's four hex digits: an escape when the run is odd.
# Matched from the start of a run only (the lookbehind): tried from every backslash of a long
# run not followed by "u", the search was quadratic in the run (seconds of CPU for one 64 KiB
# read of backslashes); a match can only start where its run starts anyway.
_SURROGATE = re.compile(rb"(?<!\\)(\\+)u[dD]([89abAB]|[c-fC-F])[0-9a-fA-F]{2}")
_LOW = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_HOLD = 12  # the end of each read is held back and read again with the next: an escape may be cut


class _SurrogateCheck:
    """The file as read, refusing an escaped lone surrogate (yajl would store `?` instead)."""

    def __init__(self, fh: BinaryIO, *, longest: int | None = None):
        self.fh = fh
        self.held = b""  # the last bytes read, not handed on yet
        self.backslashes = 0  # the run of backslashes just before `held`
        self.seen = 0  # escapes in `held` ending at or before this were checked already
        self.done = False
        self.length = 0  # bytes read so far
        self.longest = longest or longest_token()  # a reader may allow longer (Open WebUI's data: URLs)
        self.since_quote = 0  # bytes since the last quote not after a backslash
        self.last_byte = b""

    def read(self, size: int = -1) -> bytes:
        if size == 0:
            return b""  # ijson's look at the file's type
        while not self.done:
            chunk = self.fh.read(CHUNK)
            self.length += len(chunk)
            self._gaps(chunk)
            data = self.held + chunk
            if not chunk:
                self.done = True
                self._check(data, final=True)
                return data
            deferred = self._check(data, final=False)
            cut = max(0, len(data) - _HOLD)
            out, self.held = data[:cut], data[cut:]
            self.seen = max(0, (len(data) if deferred is None else deferred) - cut)
            run = len(out) - len(out.rstrip(b"\\"))
            self.backslashes = run + self.backslashes if run == len(out) else run
            if out:
                return out
        return b""

    def _gaps(self, chunk: bytes) -> None:
        """Raise `_TooLong` once more than `longest` bytes have gone by without a quote that
        is not escaped (found in C: `bytes.find`, from each end of the read)."""
        first = _quote(chunk, self.last_byte, last=False)
        if first < 0:
            self.since_quote += len(chunk)
        else:
            if self.since_quote + first > self.longest:
                raise _TooLong
            self.since_quote = len(chunk) - _quote(chunk, self.last_byte, last=True) - 1
        if self.since_quote > self.longest:
            raise _TooLong
        self.last_byte = chunk[-1:] or self.last_byte

    def _check(self, data: bytes, *, final: bool) -> int | None:
        """Raise at a lone surrogate escape; where a high one at the very end starts (its low
        half may come with the next read), else None."""
        if b"\\ud" not in data and b"\\uD" not in data:
            return None  # no surrogate escape here (the common case, found in C)
        paired_low = -1
        for m in _SURROGATE.finditer(data):
            run = len(m.group(1)) + (self.backslashes if m.start() == 0 else 0)
            if m.end() <= self.seen or run % 2 == 0:
                continue  # checked with the previous read, or an escaped backslash and "ud…"
            at = m.end() - 6
            if m.group(2) in b"89abAB":
                if _LOW.match(data, m.end()):
                    paired_low = m.end()
                    continue
                if not final and len(data) - m.end() < 6:
                    return m.start()
            elif at == paired_low:
                continue
            raise BadFile(gettext("That file contains a lone surrogate (%(escape)s) in a string: text that"
                                  " cannot be stored.") % {"escape": "\\" + data[at + 1:m.end()].decode()})
        return None


_QUOTE = re.compile(rb'(?<!\\)"')  # a quote not right after a backslash
_QUOTE_REVERSED = re.compile(rb'"(?!\\)')  # the same, in the bytes reversed


def _quote(data: bytes, before: bytes, *, last: bool) -> int:
    """The first (or last) quote in `data` not right after a backslash (`before` is the byte
    before `data`), or -1; found by the regular expression engine, in C."""
    if last:
        found = _QUOTE_REVERSED.search(data[::-1] + before)
        return -1 if found is None or found.start() >= len(data) else len(data) - 1 - found.start()
    found = _QUOTE.search(before + data, len(before))  # the lookbehind sees `before`
    return -1 if found is None else found.start() - len(before)
