"""Wall-clock helpers for schedules: time zones, ``HH:MM`` times and quiet-hour windows.

Storage is always aware UTC; a configured zone is used only to read a schedule
("02:00-06:00 in Europe/Berlin") or to show a time to a person.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
MINUTES_PER_DAY = 24 * 60


def check_timezone(name: str) -> ZoneInfo:
    """The zone called ``name`` (IANA, e.g. ``Europe/Berlin``), or ValueError saying it is unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin)") from None


def parse_clock(value: str, *, allow_24: bool = False) -> tuple[int, int]:
    """``"HH:MM"`` as (hour, minute); ``24:00`` only with ``allow_24`` (the end of a day)."""
    match = _CLOCK.match(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a time of day as HH:MM")
    hour, minute = int(match.group(1)), int(match.group(2))
    if allow_24 and (hour, minute) == (24, 0):
        return hour, minute
    if hour > 23 or minute > 59:
        raise ValueError(f"{value!r} is not a time of day as HH:MM")
    return hour, minute


@dataclass(frozen=True, slots=True)
class QuietHours:
    """A daily window ``[start, end)`` in minutes after midnight; it may wrap past midnight."""

    start: int
    end: int

    @property
    def always(self) -> bool:
        return self.start == 0 and self.end == MINUTES_PER_DAY

    def contains(self, moment: time) -> bool:
        if self.always:
            return True
        minute = moment.hour * 60 + moment.minute
        if self.start < self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end  # wraps midnight

    def __str__(self) -> str:
        return f"{self.start // 60:02d}:{self.start % 60:02d}-{self.end // 60:02d}:{self.end % 60:02d}"


def parse_quiet_hours(value: str) -> QuietHours:
    """``"02:00-06:00"``, ``"22:30-05:00"`` (wraps midnight) or ``"00:00-24:00"`` (always)."""
    start_text, sep, end_text = value.partition("-")
    if not sep:
        raise ValueError(f"{value!r} is not a window as HH:MM-HH:MM (for example 02:00-06:00)")
    sh, sm = parse_clock(start_text)
    eh, em = parse_clock(end_text, allow_24=True)
    start, end = sh * 60 + sm, eh * 60 + em
    if start == end:
        raise ValueError(f"{value!r} is an empty window; use 00:00-24:00 for always")
    return QuietHours(start, end)


def in_quiet_hours(now: datetime, window: QuietHours, zone: str) -> bool:
    """Whether ``now`` (aware) falls inside ``window`` read in ``zone``."""
    return window.contains(now.astimezone(ZoneInfo(zone)).time())
