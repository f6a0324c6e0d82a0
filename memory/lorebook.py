"""A companion's lorebook in the prompt (SPEC H2, R4, R6).

An enabled entry of the card's `character_book` enters the prompt when one of its keys appears in
the last turns (the person's new line and the turns before it, `SCAN_TURNS` of them unless the
book sets its own `scan_depth`); a `constant` entry always does, a `selective` one needs one of
its secondary keys as well. Keys match as text, case-insensitively unless the entry says
otherwise (Chinese has no word breaks to match on). The chosen entries are quoted as data by the
prompt and share the R4 budget with the rest of recalled memory (`memory.recall.context`).
"""

from collections.abc import Sequence

from memory.models import CompanionCard, LoreEntry

SCAN_TURNS = 4  # the new line and the three before it
MAX_SCAN_TURNS = 20


def scan_depth(profile_id: int) -> int:
    book = CompanionCard.objects.filter(profile_id=profile_id).values_list("book", flat=True).first() or {}
    depth = book.get("scan_depth") if isinstance(book, dict) else None
    if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0:
        return min(depth, MAX_SCAN_TURNS)
    return SCAN_TURNS


def _found(keys: Sequence[str], text: str, folded: str, case_sensitive: bool) -> bool:
    if case_sensitive:
        return any(k and k in text for k in keys)
    return any(k and k.casefold() in folded for k in keys)


def matching_entries(profile_id: int, turns: Sequence[str]) -> list[LoreEntry]:
    """The enabled entries the last `turns` (newest last) call for, highest priority first and,
    within one priority, in the card's insertion order. One query when the profile has no
    lorebook; with one, the keys are read without the contents, which are loaded only for the
    chosen entries (a turn pays for what it uses)."""
    rows = LoreEntry.objects.scan_keys(profile_id)
    if not rows:
        return []
    depth = scan_depth(profile_id)
    text = "\n".join(t for t in list(turns)[-depth:] if t)
    folded = text.casefold()
    chosen = []
    for pk, keys, secondary, constant, selective, case_sensitive in rows:
        if constant:
            chosen.append(pk)
            continue
        if not _found(keys, text, folded, case_sensitive):
            continue
        if selective and secondary and not _found(secondary, text, folded, case_sensitive):
            continue
        chosen.append(pk)
    if not chosen:
        return []
    return list(LoreEntry.objects.filter(pk__in=chosen).order_by("-priority", "insertion_order", "position"))
