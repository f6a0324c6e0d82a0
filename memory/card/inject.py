"""The copy of the card injected into the system prompt (K9).

The stored card keeps ISO dates; the injected copy adds relative time in the user's
local clock next to each date and ref ("3 天前" / "3 days ago"), so the model never does
date arithmetic. It is a pure function of (card, now, language): the caller passes the
slice's fixed reference time as ``now`` so the prompt prefix stays byte-stable for the
life of the slice, and re-renders only on a deliberate cache break (K10).
"""

from datetime import UTC, date, datetime
from typing import Literal

from .format import NEVER, PERSON_REF, Card, render_with

Language = Literal["zh", "en"]


def render_injected(card: Card, *, now: datetime, language: str) -> str:
    """The card as the prompt shows it, with relative times as of ``now`` (aware, user tz)."""
    if now.tzinfo is None:
        raise ValueError("render_injected needs an aware datetime in the user's timezone")
    lang = _language(language)
    today = now.date()  # the user's local calendar day, since now is in their timezone

    def day(value: date) -> str:
        return f"{value.isoformat()} ({relative_day(value, today=today, language=lang)})"

    def deadline(value: date) -> str:
        when = relative_day(value, today=today, language=lang)
        if value < today:  # K6/K14: an overdue item is kept and called out
            when += ",已逾期" if lang == "zh" else ", overdue"
        return f"{value.isoformat()} ({when})"

    def ref(value: str) -> str:
        if value == PERSON_REF:  # K16: written by the person, a directive to respect
            return f"[{value}] (本人亲自写的)" if lang == "zh" else f"[{value}] (written by the person)"
        local = datetime.strptime(value, "%Y/%m/%d/%H%M").date()  # slice ids are local time
        return f"[{value}] ({relative_day(local, today=today, language=lang)})"

    def updated(value: str) -> str:
        if value == NEVER:
            return value
        stamp = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        local = stamp.astimezone(now.tzinfo).date()
        return f"{value} ({relative_day(local, today=today, language=lang)})"

    return render_with(card, ref=ref, day=day, updated=updated, deadline=deadline)


def relative_day(value: date, *, today: date, language: str) -> str:
    """ "today", "3 days ago", "in 2 days", "about 4 months ago" — or the Chinese forms."""
    lang = _language(language)
    delta = (today - value).days
    if delta in (-1, 0, 1):
        words = {"en": ("tomorrow", "today", "yesterday"), "zh": ("明天", "今天", "昨天")}
        return words[lang][delta + 1]
    past, n = delta > 0, abs(delta)
    # Days stay exact for two months; beyond that an approximation reads better.
    if n < 60:
        amount, unit_en, unit_zh = n, "days", "天"
    elif n < 730:
        amount, unit_en, unit_zh = n // 30, "months", "个月"
    else:
        amount, unit_en, unit_zh = n // 365, "years", "年"
    approx = n >= 60
    if lang == "zh":
        return f"{'约 ' if approx else ''}{amount} {unit_zh}{'前' if past else '后'}"
    about = "about " if approx else ""
    return f"{about}{amount} {unit_en} ago" if past else f"in {about}{amount} {unit_en}"


def _language(language: str) -> Language:
    code = language.lower()
    if code.startswith("zh"):
        return "zh"
    if code.startswith("en"):
        return "en"
    raise ValueError(f"unsupported card language {language!r} — 'zh' or 'en'")
