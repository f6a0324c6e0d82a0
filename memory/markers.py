"""Markers in the companion's raw output (SPEC A5, C2; LEGACY_KV.md rule 1): one grammar.

A marker is `[[name:body]]` -- a name of ASCII letters or `_`, a colon, any body up to the
first `]]`. Every marker is stripped from what is shown and stored; `fav` markers are the
ones acted on (C2). The live chat (while streaming and at the end of a reply) and the legacy
import (an assistant fragment with no msg: twin) clean a reply with these same functions.
"""

import re

MARKER_RE = re.compile(r"\[\[([A-Za-z_]+):(.*?)\]\]", re.S)
FAV = "fav"
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_RUNS_OF_BLANKS = re.compile(r"[ \t]{2,}")
_BLANKS_BEFORE_NEWLINE = re.compile(r"[ \t]+\n")
_SPACES_RE = re.compile(r"\s+")


def clean(raw: str) -> tuple[str, list[str]]:
    """The reply without markers (spacing tidied), and the quoted texts of its fav markers."""
    favs = [body.strip() for name, body in MARKER_RE.findall(raw) if name == FAV and body.strip()]
    text = MARKER_RE.sub("", raw)
    text = _RUNS_OF_BLANKS.sub(" ", text)
    text = _BLANKS_BEFORE_NEWLINE.sub("\n", text)
    return text.strip(), favs


def clean_reply(raw: str) -> str:
    """The reply as the user saw it (markers removed, spacing tidied)."""
    return clean(raw)[0]


def loose(text: str) -> str:
    """Whitespace-insensitive form, for matching a legacy fragment with its msg: twin."""
    if "  " not in text and text.isprintable():
        # No whitespace but single spaces (every other whitespace character is unprintable):
        # nothing to collapse (BENCH §3: the import compares every line this way).
        return text.strip()
    return _SPACES_RE.sub(" ", text).strip()


def _opens_marker(text: str, i: int) -> bool | None:
    """At `text[i:]` == "[[...": True when a marker opens here, False when none can, None when
    the text ends before that is known."""
    j, n = i + 2, len(text)
    while j < n and text[j] in _NAME_CHARS:
        j += 1
    if j == n:
        return None
    return text[j] == ":" and j > i + 2


class StreamCleaner:
    """Strips markers from a stream of chunks, holding back text that may start a marker."""

    def __init__(self):
        self.raw = ""
        self._pending = ""

    def feed(self, chunk: str) -> str:
        """Text that is safe to show now."""
        self.raw += chunk
        text = self._pending + chunk
        out, pos = [], 0
        while True:
            start = text.find("[[", pos)
            if start == -1:
                # Hold back a final "[" that could be the beginning of "[[".
                end = max(pos, len(text) - 1) if text.endswith("[") else len(text)
                out.append(text[pos:end])
                pos = end
                break
            opens = _opens_marker(text, start)
            if opens is False:
                out.append(text[pos : start + 1])
                pos = start + 1
                continue
            end = text.find("]]", start) if opens else -1
            out.append(text[pos:start])
            if end == -1:
                pos = start  # an undecided or unterminated marker waits for more text
                break
            pos = end + 2
        self._pending = text[pos:]
        return "".join(out)

    def finish(self) -> str:
        """What is left at the end of the stream: an unterminated "marker" is just text."""
        rest, self._pending = self._pending, ""
        return rest
