"""The person corrects the card by hand (SPEC K16): edit, remove or add a line, rewrite the
portrait, revert the whole card to a snapshot.

Every edit goes through the same validated mutations as the agent's tools (limits, format,
duplicates), citing the person — `[you]` — instead of a slice, and is recorded as an
evolution run (trigger `hand_edit`) with a one-line summary and the diff, attached to the
profile's latest slice so it shows on the timeline. The run's step lists the lines removed
and added, which `memory.rewrite_guard` turns into the agent's directives.
"""

import re
from dataclasses import dataclass, replace
from datetime import date, datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from memory import limits
from memory.card import Card as ParsedCard
from memory.card import Header, apply_tool, detect_format, parse, render, stamp
from memory.card.format import PERSON_REF, CardFormatError
from memory.card.lines import SECTIONS, CardLine, card_lines
from memory.card.store import (
    line_diff,
    live_card,
    parse_or_empty,
    refresh_injected_card,
    refs_resolver,
)
from memory.card.validate import violations
from memory.models import Card, CardSnapshot, EvolutionRun, Profile, Slice

ATTRS = [attr for attr, _ in SECTIONS]
_REMOVE = {"facts": "remove_anchor_fact", "now": "remove_now", "horizon": "resolve_horizon", "lessons": "remove_lesson"}
_ADD = {"facts": "add_anchor_fact", "now": "add_now", "horizon": "add_horizon", "lessons": "add_lesson"}


class EditRefused(Exception):
    """The edit was not made; `reason` says why in words a person can act on."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class CardMoved(EditRefused):
    """The card changed since the page was loaded (another edit, or an evolution run)."""


@dataclass
class Edited:
    run: EvolutionRun
    summary: str


def _resolver(profile: Profile):
    slices = refs_resolver(profile)
    return lambda refs: slices([r for r in refs if r != PERSON_REF])


def _apply(card: ParsedCard, name: str, arguments: dict, profile: Profile) -> ParsedCard:
    result = apply_tool(card, name, arguments, refs_exist=_resolver(profile))
    if not result.accepted:
        raise EditRefused(result.message)
    return result.card


def _line(card: ParsedCard, key: str) -> CardLine:
    line = next((x for x in card_lines(card) if x.key == key), None)
    if line is None:
        raise CardMoved(_("that line is no longer on the card — reload the page"))
    return line


def _remove(card: ParsedCard, line: CardLine, profile: Profile) -> ParsedCard:
    if line.attr == "identity":
        field = line.words.split(":", 1)[0]
        return _apply(card, "set_identity", {"field": field, "value": "", "refs": [PERSON_REF]}, profile)
    arguments = {"index": line.index}
    if line.attr == "horizon":
        arguments["outcome"] = "removed by the person"
    return _apply(card, _REMOVE[line.attr], arguments, profile)


def _add(card: ParsedCard, attr: str, text: str, profile: Profile, *, day: date, since: date | None = None,
         by: str | None = None) -> ParsedCard:
    refs = [PERSON_REF]
    if attr == "identity":
        field, sep, value = text.partition(":")
        if not sep:
            raise EditRefused(_("an Identity line is 'Field: value', e.g. 'Name: Mei'"))
        return _apply(card, "set_identity", {"field": field.strip(), "value": value.strip(), "refs": refs}, profile)
    if attr not in _ADD:
        raise EditRefused(_("unknown section “%(section)s”") % {"section": attr})
    arguments: dict = {"text": text, "refs": refs}
    if attr == "now":
        arguments["since"] = (since or day).isoformat()
    if attr == "horizon":
        arguments["by"] = by or ""
    return _apply(card, _ADD[attr], arguments, profile)


def _move_last_to(card: ParsedCard, attr: str, index: int) -> ParsedCard:
    """Put the item just appended back where the edited one stood (edits keep their place)."""
    items = getattr(card, attr)
    moved = (*items[: index - 1], items[-1], *items[index - 1 : -1])
    return replace(card, **{attr: moved})


def _bounded(text: str) -> str:
    """S6: a hand-written text over PREVIOUSLY_MAX_FIELD_CHARS is refused before the card is
    read (the card's own, smaller K2 limits then apply to what is left)."""
    try:
        limits.FIELD.check(text)
    except limits.TextTooLong as too_long:
        raise EditRefused(str(too_long)) from None
    return text


def edit_line(profile: Profile, *, version: int, key: str, text: str, by: str | None = None,
              user=None, now: datetime | None = None) -> Edited:
    """Replace one line's words (its dates kept unless `by` is given), citing the person."""
    _bounded(text)
    def change(card, today):
        line = _line(card, key)
        old = getattr(card, line.attr)[line.index - 1]
        if line.attr == "identity":
            field = line.words.split(":", 1)[0]
            named, sep, value = text.partition(":")
            value = value.strip() if sep and named.strip().casefold() == field.casefold() else text.strip()
            if not value:
                raise EditRefused(_("the new wording is empty — use Remove to take the line off"))
            new = _apply(card, "set_identity", {"field": field, "value": value, "refs": [PERSON_REF]}, profile)
            return new, [line], f"{field}: {value}"
        without = _remove(card, line, profile)
        since = old.since if line.attr == "now" else None
        new = _add(without, line.attr, text, profile, day=today, since=since,
                   by=by or (old.by.isoformat() if line.attr == "horizon" else None))
        return _move_last_to(new, line.attr, line.index), [line], text.strip()

    return _commit(profile, version, change, verb="edited", user=user, now=now)


def remove_line(profile: Profile, *, version: int, key: str, user=None, now: datetime | None = None) -> Edited:
    def change(card, today):
        line = _line(card, key)
        return _remove(card, line, profile), [line], None

    return _commit(profile, version, change, verb="removed", user=user, now=now)


def add_line(profile: Profile, *, version: int, attr: str, text: str, by: str | None = None,
             user=None, now: datetime | None = None) -> Edited:
    if attr not in ATTRS:
        raise EditRefused(_("unknown section “%(section)s”") % {"section": attr})
    _bounded(text)

    def change(card, today):
        return _add(card, attr, text, profile, day=today, by=by), [], text.strip()

    return _commit(profile, version, change, verb="added", user=user, now=now, attr=attr)


def set_portrait(profile: Profile, *, version: int, text: str, user=None, now: datetime | None = None) -> Edited:
    _bounded(text)

    def change(card, today):
        old = card.portrait
        new = _apply(card, "set_portrait", {"text": text}, profile)
        return new, [], ("portrait", old, new.portrait)

    return _commit(profile, version, change, verb="portrait", user=user, now=now)


def revert_to(profile: Profile, *, version: int, slice_key: str, user=None, now: datetime | None = None) -> Edited:
    """The whole card as it was at the end of a slice (K12), checked before it is written."""
    snap = CardSnapshot.objects.filter(profile=profile, slice__key=slice_key).first()
    if snap is None:
        raise EditRefused(_("no card was recorded at the end of slice %(slice)s") % {"slice": slice_key})
    if detect_format(snap.text) != "v5":
        raise EditRefused(_("the card of slice %(slice)s is not in the current format and cannot be restored") % {"slice": slice_key})
    try:
        target = parse(snap.text)
    except CardFormatError as exc:
        raise EditRefused(_("the card of slice %(slice)s cannot be read: %(error)s") % {"slice": slice_key, "error": exc}) from exc
    problems = violations(snap.text)
    if problems:
        raise EditRefused(_("the card of slice %(slice)s breaks the card's limits: %(problem)s") % {"slice": slice_key, "problem": problems[0]})

    def change(card, today):
        return replace(target, header=card.header), "revert", slice_key

    return _commit(profile, version, change, verb="revert", user=user, now=now)


def _commit(profile, version, change, *, verb, user, now, attr=None) -> Edited:
    now = now or timezone.now()
    with transaction.atomic():
        live_card(profile)
        row = Card.objects.select_for_update().get(profile=profile)
        if row.version != version:
            raise CardMoved(_("the card changed since this page was loaded — reload and try again"))
        if detect_format(row.text) == "legacy":
            raise EditRefused(_("this card is in an older format; the next evolution run migrates it, then it can be edited"))
        latest = Slice.objects.filter(profile=profile).order_by("-started_at").first()
        today = now.date()
        before_card = parse_or_empty(row.text)
        card, gone, added = change(before_card, today)
        removed, added_items, summary = _describe(before_card, card, verb, gone, added, attr)
        header = before_card.header
        active = header.active_slice if header.active_slice != "none" else (latest.key if latest else None)
        card = stamp(card, active_slice=active, at=now) if active else replace(
            card, header=Header(updated=now.strftime("%Y-%m-%dT%H:%M:%SZ")))
        before, after = row.text, render(card)
        if render(replace(card, header=before_card.header)) == render(before_card):
            raise EditRefused(_("nothing changed"))
        row.text, row.format = after, "v5"
        row.version += 1
        row.save(update_fields=["text", "format", "version", "updated_at"])
        run = EvolutionRun.objects.create(
            profile=profile, slice=latest, trigger=EvolutionRun.Trigger.HAND, status=EvolutionRun.Status.CHANGED,
            summary=summary, diff=line_diff(before, after), card_before=before, card_after=after,
            steps=[{"at": now.isoformat(), "kind": "hand_edit", "by": getattr(user, "username", ""),
                    "removed": removed, "added": added_items}],
            model_name="", started_at=now, finished_at=now,
        )
        for open_slice in Slice.objects.filter(profile=profile, ended_at__isnull=True, injected_card__isnull=False):
            refresh_injected_card(open_slice, reason="the person edited the card")
    return Edited(run, summary)


# The run summary of each hand edit, stored in English (as every run summary is); the pages
# read it back with `parse_summary` to say it in the person's language.
SUMMARY_FORMS = {
    "revert": "You restored the card as it was at the end of slice {slice} ({out} line(s) out, {into} in)",
    "portrait": "You rewrote the portrait",
    "removed": "You removed from {section}: {words}",
    "edited": "You corrected {section}: “{words}” → “{new}”",
    "added": "You added to {section}: {words}",
}
_SUMMARY_RES = {
    verb: re.compile(
        re.sub(r"\\\{(\w+)\\\}", lambda m: f"(?P<{m.group(1)}>.+?)", re.escape(form)) + r"\Z", re.DOTALL
    )
    for verb, form in SUMMARY_FORMS.items()
}


def parse_summary(summary: str) -> tuple[str, dict[str, str]] | None:
    """(verb, fields) of a hand edit's run summary, or None when it is not one (or was cut)."""
    for verb, pattern in _SUMMARY_RES.items():
        m = pattern.match(summary or "")
        if m:
            return verb, m.groupdict()
    return None


def _describe(before: ParsedCard, after: ParsedCard, verb, gone, added, attr):
    """(removed, added, one-line summary) for the run."""
    old_lines = {x.key: x for x in card_lines(before)}
    new_lines = {x.key: x for x in card_lines(after)}
    removed = [{"section": x.section, "words": x.words, "text": x.text} for k, x in old_lines.items() if k not in new_lines]
    added_ = [{"section": x.section, "words": x.words, "text": x.text} for k, x in new_lines.items() if k not in old_lines]
    if verb == "revert":
        summary = SUMMARY_FORMS["revert"].format(slice=added, out=len(removed), into=len(added_))
    elif verb == "portrait":
        summary = SUMMARY_FORMS["portrait"]
    elif verb == "removed":
        summary = SUMMARY_FORMS["removed"].format(section=gone[0].section, words=gone[0].words)
    elif verb == "edited":
        summary = SUMMARY_FORMS["edited"].format(section=gone[0].section, words=gone[0].words, new=added)
    else:
        summary = SUMMARY_FORMS["added"].format(section=dict(SECTIONS).get(attr, attr), words=added)
    # K16/D7: a portrait the person replaced, or brought back by reverting, is theirs; the one
    # it replaced is one they took off, which the agent may not write back.
    if before.portrait != after.portrait:
        if before.portrait:
            removed.append({"section": "Past", "part": "portrait", "words": before.portrait, "text": before.portrait})
        if after.portrait:
            added_.append({"section": "Past", "part": "portrait", "words": after.portrait, "text": after.portrait})
    return removed, added_, summary[:300]


__all__ = ["CardMoved", "EditRefused", "add_line", "edit_line", "parse_summary", "remove_line", "revert_to", "set_portrait"]
