"""The scheduler hook: our own small wrapper over APScheduler's ``AsyncIOScheduler``.

Jobs (overnight sweep, resets, retention) are added by their own issues through
:meth:`Scheduler.add_interval` / :meth:`Scheduler.add_cron`; the runner starts and stops it.
A version change of APScheduler touches this file only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

_log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]


class Scheduler:
    """Start/stop lifecycle plus two ways to add a coroutine job; in-memory job store."""

    def __init__(self, *, timezone: str = "UTC") -> None:
        self._scheduler = AsyncIOScheduler(timezone=timezone)
        self._started = False

    @property
    def running(self) -> bool:
        return self._started

    def add_interval(self, job_id: str, func: Job, *, seconds: float) -> None:
        """Run ``func`` every ``seconds`` (one instance at a time; a missed run is coalesced)."""
        self._add(job_id, func, "interval", seconds=seconds)

    def add_cron(self, job_id: str, func: Job, **fields: Any) -> None:
        """Run ``func`` on a cron schedule (``hour=3, minute=0`` ...), in the scheduler's timezone."""
        self._add(job_id, func, "cron", **fields)

    def job_ids(self) -> list[str]:
        return [job.id for job in self._scheduler.get_jobs()]

    def _add(self, job_id: str, func: Job, trigger: str, **fields: Any) -> None:
        self._scheduler.add_job(
            func, trigger, id=job_id, replace_existing=True, max_instances=1, coalesce=True, **fields
        )

    async def start(self) -> None:
        if not self._started:
            self._scheduler.start()
            self._started = True
            _log.info("scheduler started", extra={"jobs": self.job_ids()})

    async def stop(self) -> None:
        if self._started:
            self._scheduler.shutdown(wait=False)
            self._started = False
