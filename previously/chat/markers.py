"""Markers in the companion's raw output (SPEC A5, C2): acted on, never shown or stored."""

import re

FAV_RE = re.compile(r"\[\[fav:(.*?)\]\]", re.S)
_OPEN = "[[fav:"


def clean(raw: str) -> tuple[str, list[str]]:
    """The reply without markers (spacing tidied), and the quoted texts of its fav markers."""
    favs = [m.strip() for m in FAV_RE.findall(raw) if m.strip()]
    text = FAV_RE.sub("", raw)
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return text.strip(), favs


class StreamCleaner:
    """Strips markers from a stream of chunks, holding back text that may start a marker."""

    def __init__(self):
        self.raw = ""
        self._pending = ""

    def feed(self, chunk: str) -> str:
        """Text that is safe to show now."""
        self.raw += chunk
        self._pending += chunk
        out = []
        while self._pending:
            start = self._pending.find(_OPEN)
            if start == -1:
                # Hold back a tail that could be the beginning of "[[fav:".
                keep = _partial_open_len(self._pending)
                out.append(self._pending[: len(self._pending) - keep])
                self._pending = self._pending[len(self._pending) - keep :]
                break
            out.append(self._pending[:start])
            end = self._pending.find("]]", start)
            if end == -1:
                self._pending = self._pending[start:]
                break
            self._pending = self._pending[end + 2 :]
        return "".join(out)

    def finish(self) -> str:
        """What is left at the end of the stream: an unterminated "marker" is just text."""
        rest, self._pending = self._pending, ""
        return rest


def _partial_open_len(text: str) -> int:
    for n in range(min(len(_OPEN) - 1, len(text)), 0, -1):
        if text.endswith(_OPEN[:n]):
            return n
    return 0
