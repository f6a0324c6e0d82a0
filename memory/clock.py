"""The user's local clock (SPEC R7): normalise what the browser sends, name the period of day."""

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# (first hour, id, Chinese label, English label); each period runs to the next one's first hour.
PERIODS = (
    (0, "small_hours", "凌晨", "small hours"),
    (5, "early_morning", "早上", "early morning"),
    (8, "morning", "上午", "morning"),
    (11, "noon", "中午", "midday"),
    (13, "afternoon", "下午", "afternoon"),
    (17, "dusk", "傍晚", "early evening"),
    (19, "evening", "晚上", "evening"),
    (23, "late_night", "深夜", "late night"),
)
PERIOD_IDS = tuple(p[1] for p in PERIODS)


def period_of(hour: int) -> str:
    """The period id for an hour 0-23."""
    current = PERIODS[0][1]
    for first, pid, _zh, _en in PERIODS:
        if hour >= first:
            current = pid
    return current


def period_label(period_id: str, language: str) -> str:
    for _first, pid, zh, en in PERIODS:
        if pid == period_id:
            return zh if language == "zh" else en
    return period_id


@dataclass(frozen=True)
class LocalClock:
    """A server instant seen on the user's wall clock."""

    local: datetime  # aware, in the user's zone (or fixed offset)
    tz_name: str

    @property
    def day_key(self) -> str:
        return self.local.strftime("%Y-%m-%d")

    @property
    def hour(self) -> int:
        return self.local.hour

    @property
    def period(self) -> str:
        return period_of(self.local.hour)


OFFSET_NAME_RE = re.compile(r"^UTC([+-])(\d{2}):(\d{2})$")


def zone_named(tz_name: str | None):
    """The zone a stored name means: an IANA name, or a fixed offset as `_offset_name` spells
    it ("UTC+08:00", what a slice keeps when the browser sent only its local time); else None."""
    if not tz_name:
        return None
    match = OFFSET_NAME_RE.match(tz_name)
    if match:
        sign, hours, minutes = match.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes))
        if offset >= timedelta(hours=24):
            return None
        return timezone(-offset if sign == "-" else offset)
    try:
        return ZoneInfo(tz_name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def resolve_zone(tz_name: str | None, local_time: str | None = None):
    """An IANA zone (or a stored offset name) when the name is valid, else the offset of the
    browser's local ISO time, else UTC."""
    zone = zone_named(tz_name)
    if zone is not None:
        return zone, tz_name
    if local_time:
        try:
            parsed = datetime.fromisoformat(local_time)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.utcoffset() is not None:
            offset = parsed.utcoffset()
            return timezone(offset), _offset_name(offset)
    return UTC, "UTC"


def _offset_name(offset: timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def local_clock(instant: datetime, tz_name: str | None = None, local_time: str | None = None) -> LocalClock:
    """The server instant `instant` on the user's clock; the server clock stays authoritative."""
    zone, name = resolve_zone(tz_name, local_time)
    return LocalClock(local=instant.astimezone(zone), tz_name=name)


def is_zone(tz_name: str | None) -> bool:
    """Whether the name is a zone this server knows ("Asia/Shanghai", "UTC", "UTC+08:00")."""
    return zone_named(tz_name) is not None
