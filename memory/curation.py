"""Curation (SPEC C1-C7): favourites and highlights, experiences, relations.

The one place the rules live: the favourite button, the companion's `[[fav:…]]` marker,
the agent's `propose_experience` tool, the review page and the admin all call these.
"""

import secrets
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from memory import limits
from memory.models import (
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Favourite,
    Highlight,
    Message,
    Profile,
    Relation,
    Tombstone,
)
from memory.phrases import say


def new_id(prefix: str) -> str:
    """`<prefix>_<epoch ms>_<6 hex>`, the shape of the legacy ids (hid, eid, rid)."""
    return f"{prefix}_{int(timezone.now().timestamp() * 1000)}_{secrets.token_hex(3)}"


# --- highlights and favourites (C1, C2) ---------------------------------------------


class HighlightRefused(Exception):
    """C1: the highlight was not made; `reason` says why in words a person or model can act on."""

    def __init__(self, reason: str, code: str = "refused"):
        self.reason = reason
        self.code = code
        super().__init__(reason)


def add_highlight(
    *,
    profile: Profile,
    text: str,
    source: str,
    message: Message | None = None,
    candidates: Iterable[Message] = (),
) -> Highlight:
    """Quote `text` from `message` (or the newest of `candidates` quoting it) as a highlight (C1).

    Refused with `HighlightRefused` unless the text occurs verbatim in that live message of
    the profile. Outer whitespace of `text` is ignored (a browser selection often carries
    it). With settings.STRICT_MID off the verbatim check is skipped (a live message of the
    profile is still required) and the highlight is marked `legacy_extra["verbatim"] = False`.
    The same text from the same message again returns the existing highlight.
    """
    text = (text or "").strip()
    if message is not None:
        if message.profile_id != profile.pk:
            raise HighlightRefused(f"message {message.mid} is not in profile {profile.key}", "not_found")
        if message.deleted_at is not None:
            raise HighlightRefused(f"message {message.mid} is deleted", "message_deleted")
    if not text:
        raise HighlightRefused("the highlight text is empty", "empty")
    pool = [message] if message is not None else [
        m for m in candidates if m.profile_id == profile.pk and m.deleted_at is None
    ]
    if not pool:
        raise HighlightRefused("no live message of this profile to quote", "not_found")
    quoted = [m for m in pool if text in m.content]
    verbatim = bool(quoted)
    if not verbatim and settings.STRICT_MID:
        where = f"message {message.mid}" if message is not None else "the conversation"
        raise HighlightRefused(f"the text does not occur verbatim in {where}; quote it exactly", "not_verbatim")
    source_message = max(quoted or pool, key=lambda m: (m.created_at, m.pk))
    existing = Highlight.objects.live().filter(profile=profile, message=source_message, content=text).first()
    if existing is not None:
        return existing
    return Highlight.objects.create(
        profile=profile,
        message=source_message,
        hid=new_id("h"),
        mid=source_message.mid,
        content=text,
        source=source,
        created_at=timezone.now(),
        legacy_extra={} if verbatim else {"verbatim": False},
    )


def add_favourite(*, profile: Profile, message: Message, excerpt: str = "") -> Favourite:
    """The user favourites a message or a part of it (C2): a favourite plus its highlight.

    Refused with `HighlightRefused` (and nothing stored) when the excerpt is not verbatim.
    Favouriting the same text again returns the existing favourite.
    """
    excerpt = (excerpt or "").strip()
    try:
        limits.FIELD.check(excerpt)  # S6: refused before anything is read or written
    except limits.TextTooLong as too_long:
        raise HighlightRefused(str(too_long), "too_long") from None
    with transaction.atomic():
        highlight = add_highlight(
            profile=profile, message=message, text=excerpt or message.content, source=Highlight.Source.USER
        )
        favourite = Favourite.objects.filter(profile=profile, message=message, excerpt=excerpt).first()
        if favourite is None:
            favourite = Favourite.objects.create(
                profile=profile, message=message, excerpt=excerpt, highlight=highlight
            )
        elif favourite.highlight_id != highlight.pk:
            favourite.highlight = highlight
            favourite.save(update_fields=["highlight"])
    return favourite


def remove_favourite(favourite: Favourite) -> None:
    """Unfavourite (C2): the favourite goes, and its highlight with its relations (C7, a soft
    delete) unless another favourite still rests on it. The message stays."""
    with transaction.atomic():
        highlight = favourite.highlight
        favourite.delete()
        if highlight is not None and not Favourite.objects.filter(highlight=highlight).exists():
            highlight.soft_delete()


# --- experiences (C3-C5) --------------------------------------------------------------


class ExperienceRefused(Exception):
    """C3: the experience was not recorded; `reason` names what to fix (e.g. missing mids)."""

    def __init__(self, reason: str, *, missing_mids: list[str] | None = None):
        self.reason = reason
        self.missing_mids = missing_mids or []
        super().__init__(reason)


def cited_messages(profile: Profile, mids: list[str], *, what: str, whose: str) -> dict[str, Message]:
    """The live messages of `profile` with these ids, by mid; refused naming every id that is
    missing or deleted (`what`: "source"/"evidence", `whose`: how the refusal names the archive)."""
    found = {m.mid: m for m in Message.objects.for_profile(profile).live().filter(mid__in=mids)}
    missing = [mid for mid in mids if mid not in found]
    if missing:
        template = MISSING_CITED.get((what, whose))
        reason = (say(template, mids=", ".join(missing)) if template else
                  f"these {what} message ids do not exist in {whose} archive (or are deleted): " + ", ".join(missing)
                  + ". Cite only message ids you were shown.")
        raise ExperienceRefused(reason, missing_mids=missing)
    return found


# The refusal of ids not in the archive, by (what, whose): phrases, shown in the reader's language.
MISSING_CITED = {
    ("source", "this profile's"): gettext_noop(
        "these source message ids do not exist in this profile's archive (or are deleted): %(mids)s. Cite only"
        " message ids you were shown."),
    ("evidence", "this person's"): gettext_noop(
        "these evidence message ids do not exist in this person's archive (or are deleted): %(mids)s. Cite only"
        " message ids you were shown."),
}


def propose_experience(
    *,
    profile: Profile,
    title: str,
    content: str,
    source_mids: list[str],
    event_time: datetime | None = None,
    time_certainty: str = "unknown",
    actor: str = "agent",
    actor_user=None,
    confirm: bool = False,
    reason: str = "",
) -> Experience:
    """Record a candidate experience citing live messages of the profile (C3); history row "create".

    `confirm=True` (the user writing down their own fact) records it active right away.
    """
    title, content = (title or "").strip(), (content or "").strip()
    try:  # S6: the stored texts' limits, before anything is read or written
        limits.FIELD.check(content)
        limits.FIELD.check(reason)
    except limits.TextTooLong as too_long:
        raise ExperienceRefused(str(too_long)) from None
    mids = list(dict.fromkeys(m.strip() for m in source_mids or [] if m and m.strip()))
    if not title or not content:
        raise ExperienceRefused(say(gettext_noop("an experience needs a non-empty title and content")))
    if time_certainty not in Experience.TimeCertainty.values:
        raise ExperienceRefused(say(gettext_noop("time_certainty must be one of %(choices)s"),
                                    choices=", ".join(Experience.TimeCertainty.values)))
    if actor not in ExperienceHistory.Actor.values:
        raise ExperienceRefused(say(gettext_noop("unknown actor %(actor)s"), actor=repr(actor)))
    if not mids:
        raise ExperienceRefused(say(gettext_noop("source_mids must name at least one archived message id")))
    found = cited_messages(profile, mids, what="source", whose="this profile's")
    with transaction.atomic():
        experience = Experience.objects.create(
            profile=profile,
            eid=new_id("exp"),
            title=title,
            content=content,
            status=Experience.Status.ACTIVE if confirm else Experience.Status.CANDIDATE,
            time_certainty=time_certainty,
            event_time=event_time,
            recorded_at=timezone.now(),
        )
        ExperienceSource.objects.bulk_create(
            ExperienceSource(experience=experience, mid=mid, message=found[mid], position=i)
            for i, mid in enumerate(mids)
        )
        experience.record(action="create", before=None, by=actor_user, actor=actor, reason=reason)
    return experience


def propose_imported_experience(*, profile: Profile, eid: str, title: str, content: str, origin: dict,
                                 reason: str) -> Experience | None:
    """A candidate experience from what another app kept about the person (SPEC C3, H1; issue
    27 point 4: ChatGPT's memory and custom instructions), idempotently by its stable `eid`.

    Such a note cites no archived line: it never was one (it is not archived, so it cannot be
    recalled as said). It cites the import instead: `legacy_extra["import"]` holds `origin`
    (app, kind, file) and the history row, actor `import`, says where it came from. It is always
    a candidate: the person confirms or rejects it on the review page. None when the eid exists
    already or was deleted for good (its tombstone keeps it out)."""
    if Experience.objects.filter(profile=profile, eid=eid).exists() or Tombstone.objects.filter(
        profile=profile, kind=Tombstone.Kind.EXPERIENCE, object_id=eid
    ).exists():
        return None
    with transaction.atomic():
        experience = Experience.objects.create(
            profile=profile, eid=eid, title=title[:300], content=content, status=Experience.Status.CANDIDATE,
            recorded_at=timezone.now(), legacy_extra={"import": origin},
        )
        experience.record(action="import", before=None, actor=ExperienceHistory.Actor.IMPORT, reason=reason,
                          note={"import": origin})
    return experience


# --- relations (C6, C7) ---------------------------------------------------------------


class RelationRefused(Exception):
    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def find_item(profile: Profile, item_id: str) -> Highlight | Experience | None:
    """A live highlight (by hid) or experience (by eid) of the profile."""
    return (
        Highlight.objects.for_profile(profile).live().filter(hid=item_id).first()
        or Experience.objects.for_profile(profile).live().filter(eid=item_id).first()
    )


def link(*, profile: Profile, from_item, to_item, type: str) -> Relation:
    """Relate two live highlights/experiences of the same profile with one of the five types (C6)."""
    if type not in Relation.Type.values:
        raise RelationRefused(say(gettext_noop("type must be one of %(choices)s"), choices=", ".join(Relation.Type.values)))
    for item in (from_item, to_item):
        if not isinstance(item, Highlight | Experience) or item.profile_id != profile.pk:
            raise RelationRefused(say(gettext_noop("both ends must be highlights or experiences of this profile")))
        if item.deleted_at is not None:
            raise RelationRefused(say(gettext_noop("%(item)s is deleted"), item=item.item_id))
    if from_item == to_item:
        raise RelationRefused(say(gettext_noop("an item cannot be related to itself")))
    ends = {
        "from_highlight": from_item if isinstance(from_item, Highlight) else None,
        "from_experience": from_item if isinstance(from_item, Experience) else None,
        "to_highlight": to_item if isinstance(to_item, Highlight) else None,
        "to_experience": to_item if isinstance(to_item, Experience) else None,
    }
    existing = Relation.objects.for_profile(profile).live().filter(type=type, **ends).first()
    if existing is not None:
        return existing
    return Relation.objects.create(
        profile=profile,
        rid=new_id("rel"),
        type=type,
        from_id=from_item.item_id,
        to_id=to_item.item_id,
        created_at=timezone.now(),
        **ends,
    )


def contradictions(experiences: Iterable[Experience]) -> list[tuple[Experience, Experience]]:
    """Pairs among `experiences` linked by a live `contradicts` relation (C6), in one query;
    none asked when fewer than two (prompt hygiene, issue 19)."""
    by_pk = {e.pk: e for e in experiences}
    if len(by_pk) < 2:
        return []
    rows = Relation.objects.live().filter(
        type=Relation.Type.CONTRADICTS, from_experience__in=by_pk, to_experience__in=by_pk
    ).values_list("from_experience_id", "to_experience_id")
    pairs, seen = [], set()
    for a, b in rows:
        key = frozenset((a, b))
        if a != b and key not in seen:
            seen.add(key)
            pairs.append((by_pk[a], by_pk[b]))
    return pairs
