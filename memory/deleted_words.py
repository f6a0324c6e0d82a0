"""Finding and blanking the words of deleted lines in derived text (SPEC D6).

Pure Python. A *quote* of a deleted text is a verbatim run of it, at least `MIN_QUOTE`
code points long (the whole text when it is shorter, down to `SHORTEST` code points):
a card line, a run's transcript, a reply or a log entry holding such a run still holds
the deleted words. Texts shorter than `SHORTEST` (a bare "ok") are too common to be
told apart from anyone else's words and are not looked for.
"""

import json
import re
from collections.abc import Callable, Iterable

DELETED = "[deleted]"
MIN_QUOTE = 12
MIN_QUOTE_CJK = 6  # a Han/kana/hangul character carries about what two Latin letters do
SHORTEST = 4
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def min_quote(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return MIN_QUOTE_CJK if cjk * 3 >= len(text) else MIN_QUOTE


class Quotes:
    """The deleted texts; `found(s)` says whether `s` quotes one, `scrub(s)` blanks them."""

    def __init__(self, texts: Iterable[str], *, whole: Iterable[str] = (),
                 common: Callable[[str], bool] | None = None):
        """`texts`: any verbatim run of them counts; `whole`: only a copy of the whole text
        (the companion's own lines, whose runs often quote the card or the person).
        `common(run)` says a run is everyday wording found elsewhere too ("I don't know what
        to"), which is then not taken for a quote."""
        self.common = common
        self._common: dict[str, bool] = {}
        self.texts: list[tuple[str, int, set[str]]] = []
        for text, entire in [(t, False) for t in texts] + [(t, True) for t in whole]:
            text = (text or "").strip()
            if len(text) < SHORTEST:
                continue
            q = len(text) if entire else min(len(text), min_quote(text))
            grams = {text[i : i + q] for i in range(len(text) - q + 1)}
            self.texts.append((text, q, grams))
        self._pieces = [self._pieces_of(text, q) for text, q, _ in self.texts]

    def __bool__(self) -> bool:
        return bool(self.texts)

    def spans(self, s: str) -> list[tuple[int, int]]:
        """Maximal [start, end) runs of `s` that are verbatim runs of a deleted text."""
        found: list[tuple[int, int]] = []
        for (text, q, grams), pieces in zip(self.texts, self._pieces, strict=True):
            if not any(p in s for p in pieces):  # C-speed rejection: every quote holds a piece
                continue
            i = 0
            while i <= len(s) - q:
                if s[i : i + q] in grams:
                    j = i + q
                    while j < len(s) and s[i : j + 1] in text:
                        j += 1
                    if not self._is_common(s[i:j]):
                        found.append((i, j))
                    i = j
                else:
                    i += 1
        found.sort()
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def _is_common(self, run: str) -> bool:
        if self.common is None:
            return False
        if run not in self._common:
            self._common[run] = self.common(run)
        return self._common[run]

    def found(self, s: str | None) -> bool:
        return bool(s) and bool(self.spans(s))

    def scrub(self, s: str) -> str:
        """`s` with every quote of a deleted text replaced by "[deleted]"."""
        if not s:
            return s
        out, last = [], 0
        for start, end in self.spans(s):
            out += [s[last:start], DELETED]
            last = end
        out.append(s[last:])
        return "".join(out)

    def scrub_json(self, value):
        """A JSON value with every string (keys too) scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self.scrub_json(v) for v in value]
        if isinstance(value, dict):
            return {self.scrub(str(k)): self.scrub_json(v) for k, v in value.items()}
        return value

    def found_json(self, value) -> bool:
        return value is not None and self.found(json.dumps(value, ensure_ascii=False))

    @staticmethod
    def _pieces_of(text: str, q: int) -> list[str]:
        if q == len(text):
            return [text]
        # A quote spans >= q code points; pieces of q//2 every q//2 steps: one lies inside.
        size = q // 2
        return [text[i : i + size] for i in range(0, len(text) - size + 1, size)]

    def chunks(self) -> list[str]:
        """Substrings one of which any quote contains: a database pre-filter (`LIKE`)."""
        return list(dict.fromkeys(p for pieces in self._pieces for p in pieces))
