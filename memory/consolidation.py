"""Keeping experiences current (SPEC C3-C5): the agent's update, merge, invalidate and confirm.

Mem0's add / update / delete / none and Graphiti's invalidation of superseded facts, with our
evidence trail: every change cites archived messages that exist, are live, are in the profile,
include a line the person wrote and share words with what they are cited for; every change is
an `ExperienceHistory` row (actor "agent", the run's id); nothing is ever deleted — a fact that
stopped being true is invalidated at the time it stopped.

The hand-edit guard: an experience the person (or an admin) confirmed, edited or rejected by
hand is not changed by the agent unless a cited message is newer than that hand edit.

Each function raises `ExperienceRefused` with a reason a model can act on, and changes nothing.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from memory.curation import ExperienceRefused, cited_messages
from memory.models import (
    EvolutionRun,
    Experience,
    ExperienceHistory,
    ExperienceSource,
    Message,
    Profile,
)
from memory.phrases import say
from memory.recall.tokenize import tokenize

HAND_ACTORS = (ExperienceHistory.Actor.USER, ExperienceHistory.Actor.ADMIN)
HAND_ACTIONS = ("confirm", "edit", "reject", "revalidate", "invalidate", "restore", "create", "merge")


@dataclass(frozen=True)
class Evidence:
    """The messages a change rests on, as found in the archive."""

    messages: list[Message]

    @property
    def mids(self) -> list[str]:
        return [m.mid for m in self.messages]

    @property
    def newest(self) -> datetime:
        return max(m.created_at for m in self.messages)


def _experience(profile: Profile, eid: object) -> Experience:
    if not isinstance(eid, str) or not eid.strip():
        raise ExperienceRefused(say(gettext_noop("name the experience by its id (exp_…), as listed in the briefing")))
    experience = Experience.objects.for_profile(profile).filter(eid=eid.strip()).first()
    if experience is None:
        raise ExperienceRefused(say(gettext_noop("no experience %(eid)s for this person — use an id from the list you were given"),
                                    eid=repr(eid)))
    if experience.deleted_at is not None:
        raise ExperienceRefused(say(gettext_noop("experience %(eid)s was deleted; it cannot be changed"), eid=experience.eid))
    if experience.flagged:
        raise ExperienceRefused(say(gettext_noop("experience %(eid)s is flagged (%(flag)s); leave it to the person"),
                                    eid=experience.eid, flag=experience.flagged))
    return experience


def evidence(profile: Profile, mids: object, *, about: str) -> Evidence:
    """The cited messages, checked: they exist and are live in this profile, one of them is the
    person's own line, and together they share words with `about` (they say so)."""
    if not isinstance(mids, list) or not [m for m in mids if isinstance(m, str) and m.strip()]:
        raise ExperienceRefused(say(gettext_noop("evidence_mids must list at least one archived message id (c_… or a_…)")))
    wanted = list(dict.fromkeys(m.strip() for m in mids if isinstance(m, str) and m.strip()))
    found = cited_messages(profile, wanted, what="evidence", whose="this person's")
    messages = [found[mid] for mid in wanted]
    if not any(m.speaker == Message.Speaker.USER for m in messages):
        raise ExperienceRefused(say(gettext_noop(
            "the evidence must include a line the person wrote (c_…); the companion's own words are not evidence")))
    claim = set(tokenize(about))
    said = set()
    for m in messages:
        said.update(tokenize(m.content))
    if claim and not claim & said:
        raise ExperienceRefused(say(gettext_noop(
            "messages %(mids)s do not say so: they share no words with “%(about)s” — cite the lines where the person"
            " says it"), mids=", ".join(wanted), about=about[:120]))
    return Evidence(messages)


def hand_edit_guard(experience: Experience, proof: Evidence) -> None:
    """Refuse unless the evidence is newer than the person's (or an admin's) last hand change."""
    last = (
        experience.history.filter(actor__in=HAND_ACTORS, action__in=HAND_ACTIONS).order_by("-created_at", "-id").first()
    )
    if last is None or proof.newest > last.created_at:
        return
    who = say(gettext_noop("the person") if last.actor == ExperienceHistory.Actor.USER else gettext_noop("an admin"))
    raise ExperienceRefused(say(gettext_noop(
        "experience %(eid)s was %(done)s by %(who)s on %(when)s UTC; the agent may change it only with evidence newer"
        " than that (none of the cited messages is)"),
        eid=experience.eid, done=_past(last.action), who=who, when=f"{last.created_at:%Y-%m-%d %H:%M}"))


# What a hand change did, as the guard's refusal says it (issue 25 point 7: phrases, so the run
# log shows them in the person's language).
PAST = {
    "confirm": gettext_noop("confirmed"), "edit": gettext_noop("edited"), "reject": gettext_noop("rejected"),
    "create": gettext_noop("written"), "revalidate": gettext_noop("revalidated"),
    "invalidate": gettext_noop("invalidated"), "restore": gettext_noop("restored"), "merge": gettext_noop("merged"),
}


def _past(action: str) -> str:
    return say(PAST[action]) if action in PAST else action + "d"


def _reason(run: EvolutionRun | None, why: str) -> str:
    why = " ".join((why or "").split())[:500]
    return why or "no reason given"


def _note(run: EvolutionRun | None, proof: Evidence) -> dict:
    return {"evidence_mids": proof.mids, **({"run_id": run.pk} if run is not None else {})}


def _cite(experience: Experience, proof: Evidence) -> None:
    """Add the evidence to the experience's sources (its chain back to the archive)."""
    known = set(experience.source_links.values_list("mid", flat=True))
    position = experience.source_links.count()
    for m in proof.messages:
        if m.mid not in known:
            ExperienceSource.objects.create(experience=experience, mid=m.mid, message=m, position=position)
            known.add(m.mid)
            position += 1


def _history(experience: Experience, *, action: str, before: dict, run, reason: str, proof: Evidence, note=None):
    row = experience.record(
        action=action,
        before=before,
        actor=ExperienceHistory.Actor.AGENT,
        reason=reason,
        note=_note(run, proof) | (note or {}),
    )
    if run is not None:
        ExperienceHistory.objects.filter(pk=row.pk).update(run=run)
    return row


# Why an experience cannot be changed, one template per change (the verb is part of the
# sentence, so each reads naturally when translated).
NO_LONGER_TRUE = {
    "updated": gettext_noop("experience %(eid)s is no longer true (invalidated %(day)s); it cannot be updated — propose"
                            " a new one if the fact holds again"),
    "merged": gettext_noop("experience %(eid)s is no longer true (invalidated %(day)s); it cannot be merged — propose"
                           " a new one if the fact holds again"),
    "confirmed": gettext_noop("experience %(eid)s is no longer true (invalidated %(day)s); it cannot be confirmed —"
                              " propose a new one if the fact holds again"),
}
WAS_REJECTED = {
    "updated": gettext_noop("experience %(eid)s was rejected; it cannot be updated"),
    "merged": gettext_noop("experience %(eid)s was rejected; it cannot be merged"),
}


def _usable(experience: Experience, verb: str) -> None:
    if experience.invalid_at is not None:
        raise ExperienceRefused(say(NO_LONGER_TRUE[verb], eid=experience.eid, day=f"{experience.invalid_at:%Y-%m-%d}"))
    if experience.status == Experience.Status.REJECTED and verb != "confirmed":
        raise ExperienceRefused(say(WAS_REJECTED[verb], eid=experience.eid))


def update_experience(
    *, profile: Profile, eid: object, title: object, content: object, evidence_mids: object, reason: object,
    run: EvolutionRun | None = None,
) -> Experience:
    """Reword an experience that is still true but changed in detail (Mem0 "update")."""
    experience = _experience(profile, eid)
    _usable(experience, "updated")
    title = " ".join(str(title or "").split())[:300]
    content = str(content or "").strip()
    if not title or not content:
        raise ExperienceRefused(say(gettext_noop("update_experience needs a non-empty title and content")))
    if title == experience.title and content == experience.content:
        raise ExperienceRefused(say(gettext_noop("experience %(eid)s already says exactly that — nothing to update"),
                                    eid=experience.eid))
    proof = evidence(profile, evidence_mids, about=f"{title} {content}")
    hand_edit_guard(experience, proof)
    with transaction.atomic():
        before = experience.snapshot()
        experience.title, experience.content = title, content
        experience.save(update_fields=["title", "content", "updated_at"])
        _cite(experience, proof)
        _history(experience, action="edit", before=before, run=run, reason=_reason(run, str(reason or "")), proof=proof)
    return experience


def merge_experiences(
    *, profile: Profile, keep_eid: object, merge_eid: object, title: object, content: object,
    evidence_mids: object, reason: object, run: EvolutionRun | None = None,
) -> Experience:
    """Fold a duplicate into the one kept: sources combined, the duplicate invalidated and
    pointing at the one kept (both keep their history)."""
    keep = _experience(profile, keep_eid)
    other = _experience(profile, merge_eid)
    if keep.pk == other.pk:
        raise ExperienceRefused(say(gettext_noop("merge needs two different experiences")))
    for e in (keep, other):
        _usable(e, "merged")
    title = " ".join(str(title or "").split())[:300] or keep.title
    content = str(content or "").strip() or keep.content
    proof = evidence(profile, evidence_mids, about=f"{title} {content}")
    hand_edit_guard(keep, proof)
    hand_edit_guard(other, proof)
    with transaction.atomic():
        keep.merge(
            other, actor=ExperienceHistory.Actor.AGENT, reason=_reason(run, str(reason or "")),
            title=title, content=content,
        )
        _cite(keep, proof)
        rows = ExperienceHistory.objects.filter(experience__in=[keep, other]).order_by("-id")[:2]
        for row in rows:
            row.after = (row.after or {}) | _note(run, proof)
            row.run = run
            row.save(update_fields=["after", "run"])
    return keep


def invalidate_experience(
    *, profile: Profile, eid: object, stopped_at: object, evidence_mids: object, reason: object,
    run: EvolutionRun | None = None, now: datetime | None = None,
) -> Experience:
    """It stopped being true (C5, Graphiti): `invalid_at` is when it stopped; the row stays."""
    experience = _experience(profile, eid)
    if experience.invalid_at is not None:
        raise ExperienceRefused(say(gettext_noop(
            "experience %(eid)s was already invalidated on %(day)s — nothing to do"),
            eid=experience.eid, day=f"{experience.invalid_at:%Y-%m-%d}"))
    when = _when(stopped_at)
    now = now or timezone.now()
    if when > now:
        raise ExperienceRefused(say(gettext_noop(
            "stopped_at %(value)s is in the future; give the time it stopped being true"), value=repr(stopped_at)))
    if experience.event_time is not None and when < experience.event_time:
        raise ExperienceRefused(say(gettext_noop("stopped_at %(value)s is before the experience began (%(day)s)"),
                                    value=repr(stopped_at), day=f"{experience.event_time:%Y-%m-%d}"))
    proof = evidence(profile, evidence_mids, about=f"{experience.title} {experience.content}")
    hand_edit_guard(experience, proof)
    with transaction.atomic():
        before = experience.snapshot()
        experience.invalid_at = when
        experience.save(update_fields=["invalid_at", "updated_at"])
        _cite(experience, proof)
        _history(
            experience, action="invalidate", before=before, run=run,
            reason=_reason(run, str(reason or "")), proof=proof, note={"stopped_at": when.isoformat()},
        )
    return experience


def confirm_with_evidence(
    *, profile: Profile, eid: object, evidence_mids: object, reason: object, run: EvolutionRun | None = None
) -> Experience:
    """A candidate becomes active because the person said so again (cited)."""
    experience = _experience(profile, eid)
    _usable(experience, "confirmed")
    if experience.status == Experience.Status.ACTIVE:
        raise ExperienceRefused(say(gettext_noop("experience %(eid)s is already active — nothing to confirm"),
                                    eid=experience.eid))
    proof = evidence(profile, evidence_mids, about=f"{experience.title} {experience.content}")
    hand_edit_guard(experience, proof)
    with transaction.atomic():
        before = experience.snapshot()
        experience.status = Experience.Status.ACTIVE
        experience.save(update_fields=["status", "updated_at"])
        _cite(experience, proof)
        _history(experience, action="confirm", before=before, run=run, reason=_reason(run, str(reason or "")), proof=proof)
    return experience


def _when(value: object) -> datetime:
    """An ISO date or time (a bare date is its start, UTC); refused when it is neither."""
    text = str(value or "").strip()
    if not text:
        raise ExperienceRefused(say(gettext_noop(
            "stopped_at is required: when it stopped being true, YYYY-MM-DD or an ISO time")))
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ExperienceRefused(say(gettext_noop("stopped_at %(value)s is not YYYY-MM-DD or an ISO time"),
                                    value=repr(text))) from None
    return when if timezone.is_aware(when) else when.replace(tzinfo=UTC)
