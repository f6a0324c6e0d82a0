"""Finding and blanking the words of deleted lines in derived text (SPEC D6).

A *quote* of a deleted text is a verbatim run of it, at least `MIN_QUOTE` code points long
(the whole text when it is shorter, down to `SHORTEST` code points): a card line, a run's
transcript, a reply or a log entry holding such a run still holds the deleted words. Texts
shorter than `SHORTEST` (a bare "ok") are too common to be told apart from anyone else's
words and are not looked for.

The search costs time linear in what is searched, however long the deleted text (issue 24
point 3: a 1M-character line): every window of `q` code points of the deleted text is hashed
once (a rolling hash, numpy), and a searched text is covered wherever one of its own windows
has one of those hashes. Overlapping covered windows make one run; a run blanked is a chain
of the deleted text's windows, which holds every verbatim run and may blank a little more,
never less. Many texts are searched in one batch (`spans_many`), so a scan over thousands of
short rows is a few numpy passes, not thousands.
"""

import re
from collections.abc import Callable, Iterable, Iterator

import numpy as np

DELETED = "[deleted]"
MIN_QUOTE = 12
MIN_QUOTE_CJK = 6  # a Han/kana/hangul character carries about what two Latin letters do
SHORTEST = 4
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_SEP = np.uint64(0x110000)  # above every code point: a window holding it belongs to no text
_BASE = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)
_PIECE = 1 << 18  # a searched text longer than this is searched in overlapping pieces
_BATCH = 1 << 20  # code points searched per numpy pass


def min_quote(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return MIN_QUOTE_CJK if cjk * 3 >= len(text) else MIN_QUOTE


def _codes(texts: list[str], pad: int) -> tuple[np.ndarray, np.ndarray]:
    """The texts' code points, mixed, one `_SEP` after each text and `pad` more at the end;
    and where each text starts in that array."""
    raw = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(lengths)
    codes = np.insert(raw.astype(np.uint64), ends, _SEP)  # after each text
    starts = np.concatenate([[0], ends[:-1]]) + np.arange(len(texts))
    codes = np.concatenate([codes, np.full(pad, _SEP, dtype=np.uint64)])
    sep = codes == _SEP
    codes = np.where(sep, _SEP, (codes + np.uint64(1)) * _MIX)
    codes ^= codes >> np.uint64(29)
    return codes, starts


def _windows(codes: np.ndarray, lengths: Iterable[int]) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(k, hash of every window of k code points, whether it holds no separator), for each k
    in `lengths`, ascending; one pass of numpy work per code point of the longest window."""
    wanted = sorted(set(lengths))
    if not wanted:
        return
    n = len(codes) - wanted[-1] + 1
    sep = np.concatenate([[0], np.cumsum(codes == _SEP)])
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(wanted[-1]):
            h = h * _BASE + codes[j : j + n]
            if j + 1 in wanted:
                k = j + 1
                yield k, h, (sep[k : k + n] - sep[:n]) == 0


def _sorted_hashes(texts: list[str], k: int) -> np.ndarray:
    codes, _ = _codes(texts, k)
    for _, h, valid in _windows(codes, [k]):
        return np.sort(h[valid], kind="stable")
    return np.zeros(0, dtype=np.uint64)


def _member(table: np.ndarray, h: np.ndarray) -> np.ndarray:
    if not len(table):
        return np.zeros(len(h), dtype=bool)
    at = np.minimum(np.searchsorted(table, h), len(table) - 1)
    return table[at] == h


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
        self.texts: list[str] = []
        grams: dict[int, list[str]] = {}  # window length → texts whose windows of it count
        entire: list[str] = []  # texts that count only whole
        for text, only_whole in [(t, False) for t in texts] + [(t, True) for t in whole]:
            text = (text or "").strip()
            if len(text) < SHORTEST:
                continue
            self.texts.append(text)
            q = len(text) if only_whole else min(len(text), min_quote(text))
            if q == len(text):
                entire.append(text)
            else:
                grams.setdefault(q, []).append(text)
        self._grams = {q: _sorted_hashes(group, q) for q, group in grams.items()}
        # A whole text is found by the hash of its first `MIN_QUOTE` (or fewer) code points,
        # then compared in full where that hash matches.
        self._prefix: dict[int, dict[int, list[str]]] = {}
        for text in dict.fromkeys(entire):
            k = min(len(text), MIN_QUOTE)
            codes, _ = _codes([text[:k]], 0)
            for _, h, _ in _windows(codes, [k]):
                self._prefix.setdefault(k, {}).setdefault(int(h[0]), []).append(text)
        self._prefix_tables = {k: np.array(sorted(by), dtype=np.uint64) for k, by in self._prefix.items()}
        self._longest = max([*self._grams, *self._prefix, 1])

    def __bool__(self) -> bool:
        return bool(self.texts)

    def spans(self, s: str) -> list[tuple[int, int]]:
        """Maximal [start, end) runs of `s` that quote a deleted text."""
        return self.spans_many([s])[0]

    def spans_many(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        """`spans` of each text, searched together in batches of about `_BATCH` code points."""
        out: list[list[tuple[int, int]]] = [[] for _ in texts]
        if not self.texts:
            return out
        # Long texts are searched in pieces overlapping by a window, so a batch stays bounded.
        pieces: list[tuple[int, int, str]] = []  # (text index, offset, piece)
        for i, text in enumerate(texts):
            if not text or len(text) < SHORTEST:
                continue
            for at in range(0, max(len(text) - self._longest + 1, 1), _PIECE):
                pieces.append((i, at, text[at : at + _PIECE + self._longest - 1]))
        raw: list[list[tuple[int, int]]] = [[] for _ in texts]
        batch: list[tuple[int, int, str]] = []
        size = 0
        for piece in pieces:
            batch.append(piece)
            size += len(piece[2])
            if size >= _BATCH:
                self._search(batch, texts, raw)
                batch, size = [], 0
        if batch:
            self._search(batch, texts, raw)
        for i, found in enumerate(raw):
            if found:
                out[i] = [run for run in _merge(found) if not self._is_common(texts[i][run[0] : run[1]])]
        return out

    def _search(self, batch: list[tuple[int, int, str]], texts: list[str],
                raw: list[list[tuple[int, int]]]) -> None:
        codes, starts = _codes([p for _, _, p in batch], self._longest)
        n = len(codes) - self._longest + 1
        begin: list[np.ndarray] = []
        end: list[np.ndarray] = []
        for k, h, valid in _windows(codes, [*self._grams, *self._prefix]):
            if k in self._grams:
                hit = np.flatnonzero(valid & _member(self._grams[k], h))
                begin.append(hit)
                end.append(hit + k)
            if k in self._prefix:
                for at in np.flatnonzero(valid & _member(self._prefix_tables[k], h)).tolist():
                    piece = int(np.searchsorted(starts, at, side="right")) - 1
                    i, offset, _ = batch[piece]
                    local = offset + at - int(starts[piece])
                    raw[i] += [(local, local + len(text)) for text in self._prefix[k][int(h[at])]
                               if texts[i].startswith(text, local)]
        if not begin:
            return
        b, e = np.concatenate(begin), np.concatenate(end)
        if not len(b):
            return
        depth = np.cumsum(np.bincount(b, minlength=n + self._longest) - np.bincount(e, minlength=n + self._longest))
        covered = np.concatenate([[False], depth > 0, [False]])
        edges = np.flatnonzero(covered[1:] != covered[:-1])
        for start, stop in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
            piece = int(np.searchsorted(starts, start, side="right")) - 1
            i, offset, _ = batch[piece]
            base = offset - int(starts[piece])
            raw[i].append((start + base, stop + base))

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
        return _blank(s, self.spans(s))

    def blanked(self, texts: Iterable[str]) -> dict[str, str]:
        """{text: text scrubbed} for each of `texts` that quotes a deleted text (one batch)."""
        unique = list(dict.fromkeys(texts))
        return {s: _blank(s, spans) for s, spans in zip(unique, self.spans_many(unique), strict=True) if spans}

    def scrub_json(self, value, blanked: dict[str, str] | None = None):
        """A JSON value with every string (keys too) scrubbed; `blanked` from `blanked()`."""
        if blanked is None:
            blanked = self.blanked(json_strings(value))
        if isinstance(value, str):
            return blanked.get(value, value)
        if isinstance(value, list):
            return [self.scrub_json(v, blanked) for v in value]
        if isinstance(value, dict):
            return {blanked.get(str(k), str(k)): self.scrub_json(v, blanked) for k, v in value.items()}
        return value

    def found_json(self, value) -> bool:
        return value is not None and bool(self.blanked(json_strings(value)))


def json_strings(value) -> Iterator[str]:
    """Every string of a JSON value, keys included, each as stored (not JSON-escaped)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from json_strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from json_strings(v)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _blank(s: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in spans:
        out += [s[last:start], DELETED]
        last = end
    out.append(s[last:])
    return "".join(out)

