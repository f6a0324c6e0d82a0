"""Quoting user-supplied text for a prompt (SPEC R6, S5): data goes between <<< and >>>, and
no spelling of three angle brackets inside it — look-alike characters, combining marks,
invisible characters or HTML character references — can close the block. Used by the chat's
prompt and the arrival briefing (previously.chat.prompt re-exports it)."""

import html
import re
import unicodedata

OPEN, CLOSE = "<<<", ">>>"
# "<" and ">" and their look-alikes (full-width, small, CJK brackets, guillemets, math),
# with how many brackets each one reads as ("≫" looks like two, "⋙" like three).
_LEFT = {c: 1 for c in "<＜﹤〈《⟨‹«❮❬⟪〈˂ᐸ❰⧼⋖"} | {"≪": 2, "⪡": 2, "⋘": 3, "⫷": 3}
_RIGHT = {c: 1 for c in ">＞﹥〉》⟩›»❯❭⟫〉˃ᐳ❱⧽⋗"} | {"≫": 2, "⪢": 2, "⋙": 3, "⫸": 3}
_BRACKETS = frozenset(_LEFT) | frozenset(_RIGHT)
_SPELT = {"≪": "< <", "≫": "> >", "⪡": "< <", "⪢": "> >", "⋘": "< < <", "⋙": "> > >",
          "⫷": "< < <", "⫸": "> > >"}
# An HTML character reference (named, decimal or hex; the ";" is optional in HTML): one that
# stands for a bracket is read as that bracket, so "&gt;&gt;&gt;" is a run like ">>>".
_ENTITY = re.compile(r"&(?:#[0-9]{1,8};?|#[xX][0-9a-fA-F]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};?)")


def _hidden(ch: str) -> bool:
    # Format characters (zero-width, bidi controls, tags…) draw nothing and can hide a run.
    return unicodedata.category(ch) == "Cf"


def _mark(ch: str) -> bool:
    # A combining mark draws on the bracket before it; "<\u0301<<" still reads as "<<<".
    return unicodedata.category(ch) in ("Mn", "Me")


def neutralise(text: str) -> str:
    """User-supplied text made safe inside <<< >>>: no run of three angle brackets survives,
    however it is spelt (look-alikes, invisible characters or combining marks between them)."""
    if _BRACKETS.isdisjoint(text) and "&" not in text:
        return text  # no bracket of any kind: nothing can form a run (the common case, fast)
    if "&" in text:
        text = _ENTITY.sub(_bracket_entity, text)
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        brackets = [c for c in run if not _mark(c)]
        left = sum(_LEFT.get(c, 0) for c in brackets)
        right = sum(_RIGHT.get(c, 0) for c in brackets)
        if left >= 3 or right >= 3:
            out.append(" ".join(_SPELT.get(c, c) for c in brackets))  # marks in the run are dropped
        else:
            out.extend(run)
        run.clear()

    for ch in text:
        if _hidden(ch):
            continue
        if ch in _LEFT or ch in _RIGHT or (run and _mark(ch)):
            run.append(ch)
        else:
            if run:
                flush()
            out.append(ch)
    if run:
        flush()
    return "".join(out)


def quote(text: str) -> str:
    """Wrap data in the block the safety boundary names (R6)."""
    return f"{OPEN}\n{neutralise(text)}\n{CLOSE}"


def quote_inline(text: str) -> str:
    """A short value (a name, a Horizon item) quoted on one line: `<<< value >>>` (R6, S5)."""
    return f"{OPEN} {neutralise(' '.join(text.split()))} {CLOSE}"


def _bracket_entity(match: re.Match) -> str:
    decoded = html.unescape(match.group(0))
    return decoded if decoded in _LEFT or decoded in _RIGHT else match.group(0)
