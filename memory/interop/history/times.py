"""Source times, to the second and timezone-aware (SPEC H1).

Epoch seconds (ChatGPT, Open WebUI) and ISO 8601 with an offset (Claude, newer SillyTavern)
are absolute. A time written without a zone — SillyTavern's older `send_date`, "June 14, 2025
6:22pm", or an ISO time with no offset — is the person's wall clock, read in `zone` (the
companion's time zone).
"""

import re
from datetime import UTC, datetime, tzinfo

# Epoch values beyond this are milliseconds (SillyTavern once wrote Date.now()).
MS_THRESHOLD = 100_000_000_000
_ST_TEXT = re.compile(r"\s*([A-Za-z]+)\s+(\d{1,2}),\s*(\d{4})\s+(\d{1,2}):(\d{2})\s*([ap]m)\s*\Z", re.I)
_ST_HUMAN = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*@\s*(\d{1,2})h\s*(\d{1,2})m(?:\s*(\d{1,2})s)?(?:\s*\d+ms)?\s*\Z")
MONTHS = {m: i for i, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"), 1)}


def from_epoch(value) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    seconds = value / 1000 if abs(value) >= MS_THRESHOLD else value
    try:
        return datetime.fromtimestamp(int(seconds), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def from_text(value, zone: tzinfo) -> datetime | None:
    """An ISO 8601 time, or SillyTavern's text forms; None when it is none of them."""
    if isinstance(value, (int, float)):
        return from_epoch(value)
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        return None
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        parsed = _sillytavern(text)
        if parsed is None:
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone)
    return parsed.replace(microsecond=0)


def _sillytavern(text: str) -> datetime | None:
    try:
        if m := _ST_TEXT.match(text):
            month, day, year, hour, minute, half = m.groups()
            hour = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
            return datetime(int(year), MONTHS[month.lower()], int(day), hour, int(minute))
        if m := _ST_HUMAN.match(text):
            year, month, day, hour, minute, second = m.groups()
            return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0))
    except (KeyError, ValueError):
        return None
    return None
