"""Our own small wrapper over APScheduler's ``AsyncIOScheduler``, and the schedules it understands.

:class:`Scheduler` has a start/stop lifecycle and runs coroutine jobs on an
:class:`Every` (interval) or :class:`Cron` schedule, in memory: what must survive a restart
(when a job is next due, the reminders users set) lives in SQL, not in a pickled job store.
:class:`Cron` is also how a task's cron expression is checked and stepped. A version change
of APScheduler touches this file only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from agent.errors import HygieiaError

_log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Every:
    """Every ``seconds`` seconds."""

    seconds: float

    def next_after(self, moment: datetime) -> datetime:
        return moment + timedelta(seconds=self.seconds)

    def describe(self) -> str:
        return f"every {_duration(self.seconds)}"

    def trigger(self, timezone: str) -> BaseTrigger:
        return IntervalTrigger(seconds=self.seconds, timezone=ZoneInfo(timezone))


_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _weekday(token: str) -> int:
    lowered = token.strip().lower()
    if lowered[:3] in _DAY_NAMES and lowered.isalpha():
        return _DAY_NAMES.index(lowered[:3])
    if not lowered.isdigit() or int(lowered) > 7:
        raise ValueError(f"day of week {token!r} is not 0-7 or a day name")
    return int(lowered) % 7  # 0 and 7 are both Sunday


def cron_weekdays(field: str) -> str:
    """A crontab day-of-week field (0 or 7 = Sunday) as APScheduler's day names.

    APScheduler 3 counts 0 as Monday, so ``from_crontab("30 8 * * 1-5")`` would mean
    Tuesday to Saturday; spelling the days out avoids that.
    """
    if field in ("*", "?"):
        return "*"
    days: set[int] = set()
    for part in field.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else None
        if step_text and step is None:
            raise ValueError(f"day of week step {step_text!r} is not a positive number")
        if span == "*":
            first, last = 0, 6
        elif "-" in span:
            low, _, high = span.partition("-")
            first, last = _weekday(low), _weekday(high)
            if high.strip() == "7":
                last = 7
            if last < first:
                raise ValueError(f"day of week range {span!r} runs backwards")
        else:
            first = last = _weekday(span)
        days.update(d % 7 for d in range(first, last + 1, step or 1))
    return ",".join(_DAY_NAMES[d] for d in sorted(days))


class Cron:
    """A five-field crontab expression (minute hour day-of-month month day-of-week) read in
    ``timezone``; day of week as in crontab (0 or 7 = Sunday, or names).

    Raises ValueError, with the reason, for an expression that cannot be read. A day-of-month
    and a day-of-week restriction together are refused: crontab ORs them, APScheduler ANDs them.
    """

    def __init__(self, expression: str, timezone: str = "UTC") -> None:
        self.expression = " ".join(expression.split())
        self.timezone = timezone
        fields = self.expression.split(" ")
        if len(fields) != 5:
            raise ValueError(
                f"cron {expression!r} must have 5 fields (minute hour day-of-month month day-of-week)"
            )
        minute, hour, day, month, weekday = fields
        if day not in ("*", "?") and weekday not in ("*", "?"):
            raise ValueError(f"cron {expression!r}: restrict the day of the month or of the week, not both")
        try:
            self._trigger = CronTrigger(
                minute=minute,
                hour=hour,
                day=day,
                month=month,
                day_of_week=cron_weekdays(weekday),
                timezone=ZoneInfo(timezone),
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"cron {expression!r} is not valid: {exc}") from None

    @classmethod
    def daily(cls, hour: int, minute: int, timezone: str = "UTC") -> Cron:
        return cls(f"{minute} {hour} * * *", timezone)

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire time strictly after ``moment`` (``None``: it never fires again)."""
        fire: datetime | None = self._trigger.get_next_fire_time(None, moment + _TICK)
        return fire

    def describe(self) -> str:
        return f"cron {self.expression} ({self.timezone})"

    def trigger(self, timezone: str) -> BaseTrigger:
        return self._trigger


Schedule = Every | Cron


def _duration(seconds: float) -> str:
    if seconds % 86400 == 0:
        return f"{int(seconds // 86400)} d"
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


class Scheduler:
    """Start/stop lifecycle plus ways to add a coroutine job; in-memory job store."""

    def __init__(self, *, timezone: str = "UTC") -> None:
        self._timezone = timezone
        self._scheduler = AsyncIOScheduler(timezone=ZoneInfo(timezone))
        self._started = False

    @property
    def running(self) -> bool:
        return self._started

    def add(self, job_id: str, func: Job, schedule: Schedule) -> None:
        """Run ``func`` on ``schedule`` (one instance at a time; missed runs are coalesced into one)."""
        self._scheduler.add_job(
            func,
            schedule.trigger(self._timezone),
            id=job_id,
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )

    def add_interval(self, job_id: str, func: Job, *, seconds: float) -> None:
        """Run ``func`` every ``seconds``."""
        self.add(job_id, func, Every(seconds))

    def add_cron(self, job_id: str, func: Job, **fields: Any) -> None:
        """Run ``func`` on a cron schedule given as fields (``hour=3, minute=0`` ...)."""
        self._scheduler.add_job(
            func,
            CronTrigger(timezone=ZoneInfo(self._timezone), **fields),
            id=job_id,
            replace_existing=True,
            max_instances=1,
            coalesce=True,
        )

    def job_ids(self) -> list[str]:
        return [job.id for job in self._scheduler.get_jobs()]

    def next_run(self, job_id: str) -> datetime | None:
        """When APScheduler fires ``job_id`` next in this process (``None`` before start)."""
        job = self._scheduler.get_job(job_id)
        when: datetime | None = getattr(job, "next_run_time", None) if job is not None else None
        return when

    async def start(self) -> None:
        if not self._started:
            self._scheduler.start()
            self._started = True
            _log.info("scheduler started", extra={"jobs": self.job_ids()})

    async def stop(self) -> None:
        if self._started:
            self._scheduler.shutdown(wait=False)
            self._started = False

    def require_started(self) -> None:
        if not self._started:
            raise HygieiaError("Scheduler.start() has not been called")
