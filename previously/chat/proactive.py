"""Proactive messages (SPEC K15, K6, K14): the companion writes first.

Two occasions: a Horizon item of the live card falls due (`check_all`, run by the server
process's housekeeping loop every PREVIOUSLY_PROACTIVE_CHECK_SECONDS and by
`manage.py send_proactive`), and the user opens the chat after more than
PREVIOUSLY_PROACTIVE_RETURN_HOURS away (`welcome_back`, queued when the page's socket
connects: the arrival briefing of K14, written first). The rules — switch, daily limit with
the legacy count, never mid-conversation, quiet hours, one message per occasion — are
`memory.proactive`'s. With a model the text is the model's, from a short instruction; offline
(or when the model fails) only due Horizon items get a fixed, plainly worded reminder.
A message sent is archived (message_type=proactive), so a page opened later shows it, and is
pushed to the profile's open pages at once.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.tasks import task
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import gettext

from memory import markers
from memory import proactive as rules
from memory.card.store import live_card
from memory.clock import local_clock
from memory.models import Message, ProactiveSend, Profile
from previously.agent.briefing import briefing_text
from previously.agent.lifecycle import archive_line
from previously.chat import prompt
from previously.chat.turn import assistant_mid
from previously.i18n import for_profile
from previously.llm import ProviderError, get_provider
from previously.llm.select import output_cap, provider_for
from previously.push import push

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    profile: str
    reason: str
    subject: str = ""
    text: str = ""
    message: Message | None = None
    skipped: str = ""  # why nothing was sent

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.profile}: skipped ({self.skipped})"
        state = "sent" if self.message is not None else "would send"
        return f"{self.profile}: {state} {self.reason} [{self.subject}]: {self.text}"


# --- the two occasions --------------------------------------------------------------------

def check_all(*, now: datetime | None = None, dry_run: bool = False) -> list[Outcome]:
    """One pass over the profiles whose card has Horizon items: announce one due item each."""
    now = now or timezone.now()
    outcomes = []
    candidates = Profile.objects.filter(proactive_enabled=True, card__text__contains="— by: ").order_by("pk")
    for profile in candidates:
        try:
            outcome = horizon_due(profile, now=now, dry_run=dry_run)
        except Exception:  # noqa: BLE001 - one profile's failure never stops the others
            log.exception("proactive check failed for profile %s", profile.pk)
            continue
        if outcome is not None:
            outcomes.append(outcome)
    return outcomes


@task()
def proactive_check() -> int:
    """K15: one pass announcing due Horizon items (queued by the housekeeping loop); returns
    how many messages were sent."""
    return sum(1 for outcome in check_all() if outcome.message is not None)


def horizon_due(profile: Profile, *, now: datetime | None = None, dry_run: bool = False) -> Outcome | None:
    """Announce the profile's most recently due Horizon item, once; None when nothing is due."""
    now = now or timezone.now()
    tz = rules.user_tz(profile)
    local = local_clock(now, tz).local
    due = rules.due_items(profile, today=local.date())
    if not due:
        return None
    first = due[0]
    outcome = Outcome(profile=profile.key, reason=ProactiveSend.Reason.HORIZON_DUE, subject=first.subject)
    why = rules.refusal(profile, now=now, local=local)
    if why:
        outcome.skipped = why
        return outcome
    outcome.text = _generate(profile, _horizon_instruction(profile, first)) or reminder(profile, first)
    if not dry_run:
        outcome.message = _send(profile, outcome, now=now, tz=tz)
        if outcome.message is None:
            outcome.skipped = "already announced or no longer allowed"
    return outcome


def welcome_back(profile: Profile, *, now: datetime | None = None) -> Outcome | None:
    """After a long absence, the companion writes first (K14's briefing). Needs a model: offline
    mode sends only the deterministic Horizon reminders."""
    now = now or timezone.now()
    hours = settings.PREVIOUSLY_PROACTIVE_RETURN_HOURS
    if hours <= 0 or get_provider().offline:
        return None
    away = rules.away_for(profile, now)
    if away is None or away[1] < timedelta(hours=hours):
        return None
    last, gap = away
    subject = f"return:{last.mid}"
    outcome = Outcome(profile=profile.key, reason=ProactiveSend.Reason.RETURN, subject=subject)
    tz = rules.user_tz(profile)
    local = local_clock(now, tz).local
    why = rules.refusal(profile, now=now, local=local, present=True) or (
        "already welcomed" if rules.announced(profile, subject) else None
    )
    if why:
        outcome.skipped = why
        return outcome
    text = _generate(profile, _return_instruction(profile, gap, tz=tz, now=now))
    if not text:
        outcome.skipped = "the model gave no text"
        return outcome
    outcome.text = text
    outcome.message = _send(profile, outcome, now=now, tz=tz, present=True)
    return outcome


@task()
def welcome_back_task(profile_id: int) -> bool:
    """K15/K14: `welcome_back` off the socket's path (queued on connect); True when sent."""
    profile = Profile.objects.filter(pk=profile_id).first()
    outcome = welcome_back(profile) if profile is not None else None
    return outcome is not None and outcome.message is not None


def should_welcome_back(profile: Profile, *, now: datetime | None = None) -> bool:
    """Cheap test on page load (socket connect): worth queueing `welcome_back`?"""
    now = now or timezone.now()
    hours = settings.PREVIOUSLY_PROACTIVE_RETURN_HOURS
    if hours <= 0 or not profile.proactive_enabled or get_provider().offline:
        return False
    away = rules.away_for(profile, now)
    return away is not None and away[1] >= timedelta(hours=hours) and not rules.announced(profile, f"return:{away[0].mid}")


# --- wording ------------------------------------------------------------------------------

def reminder(profile: Profile, due: rules.Due) -> str:
    """The offline (and fallback) wording: plainly a reminder from the card, in the profile's language."""
    words = {"item": due.item.text, "date": due.item.by.isoformat()}
    with for_profile(profile):
        if due.late == 0:
            return gettext("Reminder from your card: “%(item)s” is due today (%(date)s).") % words
        return gettext("Reminder from your card: “%(item)s” was due on %(date)s. How did it go?") % words


def _horizon_instruction(profile: Profile, due: rules.Due) -> str:
    when = "today" if due.late == 0 else f"on {due.item.by.isoformat()}"
    return (
        f"Write first, unprompted: a commitment on the user's card falls due {when}: "
        f"“{due.item.text}”. In one or two warm sentences, remind them of it or ask how it is going."
    )


def _return_instruction(profile: Profile, gap: timedelta, *, tz: str, now: datetime) -> str:
    days = gap.days
    away = f"{days} day{'s' if days != 1 else ''}" if days else f"{int(gap.total_seconds() // 3600)} hours"
    lines = [f"Write first, unprompted: the user has just opened the chat after {away} away. "
             "Welcome them back in one or two warm sentences."]
    briefing = briefing_text(profile, tz=tz, now=now)
    if briefing:
        lines.append(briefing)
    return "\n".join(lines)


def _generate(profile: Profile, instruction: str) -> str:
    """The model's text for a proactive message, or "" offline or when the model fails."""
    provider = provider_for(profile)
    if provider.offline:
        return ""
    w = prompt.words_for(profile)
    card = live_card(profile).text.strip()
    language = "Chinese (简体中文)" if profile.language == "zh" else "English"
    system = "\n\n".join([
        f"{w.constitution}\n{profile.persona.strip() or w.not_set}",
        f"{w.card}\n{prompt.quote(card) if card else w.no_card}",
        w.safety,
        w.awareness,
        f"# Task\n{instruction}\nWrite in {language}. Do not use any [[…]] markers. "
        "Reply with the message only.",
    ])
    try:
        completion = provider.complete([{"role": "system", "content": system}], max_tokens=output_cap("proactive"))
    except ProviderError as exc:
        log.warning("proactive message for %s: model failed (%s)", profile.key, exc)
        return ""
    text, _ = markers.clean(completion.content or "")
    return text.strip()[:2000]


# --- the write and the delivery -------------------------------------------------------------

def _send(profile: Profile, outcome: Outcome, *, now: datetime, tz: str, present: bool = False) -> Message | None:
    # A slice it closes (the idle conversation before it ends here) evolves (S1, K10).
    archived = archive_line(
        rules.record_proactive, profile=profile, mid=assistant_mid(), reason=outcome.reason,
        subject=outcome.subject, content=outcome.text, now=now, tz=tz, present=present,
    )
    if archived is None:
        return None
    deliver(profile, archived.message)
    return archived.message


def deliver(profile: Profile, message: Message) -> None:
    """Push the line to the profile's open chat pages; with none open it waits in the archive."""
    html = render_to_string("chat/chat.html#appended", {"message": message, "lang": profile.language})
    try:
        push(profile, html)
    except Exception:  # noqa: BLE001 - it is archived; the next page load shows it
        log.exception("could not push proactive message %s", message.mid)
