"""Scheduled jobs that run once per cluster: every worker fires them, one worker runs each occurrence.

:class:`ClusterJobs` owns the process's :class:`gateway.scheduling.scheduler.Scheduler`. Each firing
asks the store to claim the job's due occurrence (:meth:`gateway.store.job_ops.JobOps.job_claim`):
the claim moves the job's next due time past now and leases the job to this worker, so the
other workers' firings for the same occurrence find nothing to do. While the job runs its
lease is renewed; its outcome (status, counts, error, duration) is stored, logged, and
exported by the admin app's ``/metrics``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from agent.clock import Clock, utcnow
from gateway.scheduling.scheduler import Schedule, Scheduler
from gateway.store.job_ops import lease_name
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

JobFunc = Callable[[datetime], Awaitable[dict[str, Any]]]
"""A job: given the time it runs at, does its work and reports counts (``{"compacted": 2}``)."""


def did_work(result: dict[str, Any]) -> bool:
    """Whether a job's counts say it did something: any positive count."""
    return any(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in result.values())


MAX_EARLY_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job: its name, its schedule, the work, and what an operator reads about it."""

    name: str
    schedule: Schedule
    run: JobFunc
    note: str = ""
    acted: Callable[[dict[str, Any]], bool] = did_work
    """Whether a run's counts are worth an INFO line; a run that found nothing logs at DEBUG
    (a job every 10 s would otherwise write thousands of lines a day)."""

    def describe(self) -> str:
        return self.schedule.describe() + (f", {self.note}" if self.note else "")


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """One run of one job, as this worker saw it."""

    name: str
    status: Literal["ok", "failed"]
    result: dict[str, Any]
    error: str | None
    duration_ms: int


class ClusterJobs:
    """The jobs of one worker; ``start`` registers them (in SQL and APScheduler), ``stop`` ends them."""

    def __init__(
        self,
        store: Store,
        *,
        owner: str,
        timezone: str = "UTC",
        lease_seconds: float = 120.0,
        clock: Clock = utcnow,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._store = store
        self._owner = owner
        self._timezone = timezone
        self._lease = lease_seconds
        self._clock = clock
        self._scheduler = scheduler or Scheduler(timezone=timezone)
        self._jobs: dict[str, JobSpec] = {}
        self._running: set[asyncio.Task[Any]] = set()

    @property
    def owner(self) -> str:
        return self._owner

    @property
    def running(self) -> bool:
        return self._scheduler.running

    @property
    def jobs(self) -> list[JobSpec]:
        return list(self._jobs.values())

    def add(self, spec: JobSpec) -> None:
        if self._scheduler.running:
            raise RuntimeError("add jobs before start()")
        self._jobs[spec.name] = spec

    def describe(self) -> list[str]:
        """One line per job, as ``hygieia run`` lists them at start."""
        return [f"{spec.name}: {spec.describe()}" for spec in self._jobs.values()]

    async def start(self) -> None:
        now = self._clock()
        for spec in self._jobs.values():
            first = self._next_due(spec, now)
            await self._store.job_register(spec.name, schedule=spec.describe(), next_due_at=first)
            self._scheduler.add(f"job:{spec.name}", self._firing(spec.name), spec.schedule)
        await self._scheduler.start()
        if self._jobs:
            _log.info("scheduled jobs (%s): %s", self._timezone, "; ".join(self.describe()))
        else:
            _log.info("no scheduled jobs")

    async def stop(self) -> None:
        await self._scheduler.stop()
        for task in list(self._running):
            task.cancel()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    def _firing(self, name: str) -> Callable[[], Awaitable[None]]:
        async def fire() -> None:
            task = asyncio.current_task()
            if task is not None:
                self._running.add(task)
            try:
                await self.run_due(name)
            finally:
                if task is not None:
                    self._running.discard(task)

        return fire

    def _next_due(self, spec: JobSpec, after: datetime) -> datetime:
        # A cron that never fires again parks the job far ahead instead of firing it now.
        return spec.schedule.next_after(after) or after + timedelta(days=3650)

    def _early(self, spec: JobSpec) -> timedelta:
        """How early a firing may claim: timers are not exact, and a firing a hair before the
        due time must not skip a whole period."""
        period = (self._next_due(spec, self._clock()) - self._clock()).total_seconds()
        return timedelta(seconds=min(MAX_EARLY_SECONDS, max(0.0, period / 10)))

    async def run_due(self, name: str, *, now: datetime | None = None) -> JobOutcome | None:
        """Run ``name`` here if its occurrence is due and no other worker took it; ``None`` otherwise.

        A failure of the job itself is caught, stored and logged (the scheduler goes on); a
        failure to reach the database is logged and the next firing tries again.
        """
        spec = self._jobs[name]
        now = now or self._clock()
        try:
            claimed = await self._store.job_claim(
                name,
                self._owner,
                now=now,
                next_due_at=self._next_due(spec, now),
                lease_seconds=self._lease,
                early=self._early(spec),
            )
        except Exception:  # the database may be briefly away: the next firing tries again
            _log.exception("could not claim scheduled job %s", name, extra={"job": name})
            return None
        if not claimed:
            return None
        return await self._run_claimed(spec, now)

    async def _run_claimed(self, spec: JobSpec, now: datetime) -> JobOutcome:
        fields: dict[str, Any] = {"job": spec.name, "owner": self._owner}
        _log.debug("job %s started", spec.name, extra=fields)
        started = time.perf_counter()
        heartbeat = asyncio.create_task(self._keep_lease(spec.name))
        status: Literal["ok", "failed"] = "ok"
        result: dict[str, Any] = {}
        error: str | None = None
        try:
            result = await spec.run(now)
        except asyncio.CancelledError:
            status, error = "failed", "cancelled (the worker stopped)"
            raise
        except Exception as exc:  # one job failing must not stop the scheduler or the other jobs
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            _log.exception("job %s failed", spec.name, extra=fields)
        finally:
            heartbeat.cancel()
            duration_ms = int((time.perf_counter() - started) * 1000)
            await self._finish(spec.name, status, result, error, duration_ms)
        if status == "ok":
            counts = ", ".join(f"{k} {v}" for k, v in result.items()) or "nothing to report"
            _log.log(
                logging.INFO if spec.acted(result) else logging.DEBUG,
                "job %s finished in %d ms: %s",
                spec.name,
                duration_ms,
                counts,
                extra={**fields, "result": result, "duration_ms": duration_ms},
            )
        return JobOutcome(spec.name, status, result, error, duration_ms)

    async def _finish(
        self, name: str, status: Literal["ok", "failed"], result: dict[str, Any], error: str | None, ms: int
    ) -> None:
        try:
            await asyncio.shield(
                self._store.job_finish(
                    name, self._owner, status=status, result=result, error=error, duration_ms=ms
                )
            )
        except Exception:  # the lease then simply expires; the next occurrence is unaffected
            _log.exception("could not record the outcome of job %s", name, extra={"job": name})

    async def _keep_lease(self, name: str) -> None:
        """Renew the job's lease while it runs: a long run is not a dead worker."""
        while True:
            await asyncio.sleep(max(0.5, self._lease / 3))
            try:
                lease = await self._store.lease_renew(lease_name(name), self._owner, ttl_seconds=self._lease)
            except Exception:  # a blip: the lease outlasts a few missed renewals
                _log.warning("could not renew the lease of job %s", name, exc_info=True, extra={"job": name})
                continue
            if lease is None:
                _log.warning("job %s lost its lease while running", name, extra={"job": name})
