"""The jobs ``hygieia run`` schedules, assembled from the configuration (``scheduler:`` keys)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent.context_engine import ContextEngine
from gateway.config import Settings
from gateway.jobs.resets import ScheduledResets
from gateway.jobs.retention import Retention
from gateway.jobs.sweep import Sweep
from gateway.jobs.upkeep import Upkeep
from gateway.local_time import parse_clock
from gateway.scheduling.runs import ClusterJobs, JobFunc, JobSpec
from gateway.scheduling.scheduler import Cron, Every
from gateway.scheduling.tasks import TaskBook
from gateway.serving.dispatch import Gateway
from gateway.serving.sessions import SessionDirectory
from gateway.store.repository import Store


@dataclass(frozen=True, slots=True)
class JobParts:
    """The parts of a running service the jobs act through."""

    store: Store
    gateway: Gateway
    engine: ContextEngine
    directory: SessionDirectory
    tools: Callable[[], list[dict[str, Any]]]
    tasks: TaskBook | None = None


def task_book(settings: Settings, store: Store) -> TaskBook | None:
    """The tasks users set with the ``schedule`` tool, when tasks (and the scheduler) are on."""
    if not (settings.scheduler.enabled and settings.scheduler.tasks.enabled):
        return None
    return TaskBook(store, settings.scheduler.tasks, timezone=settings.timezone)


def build_jobs(settings: Settings, parts: JobParts) -> ClusterJobs:
    """Every configured job, on a :class:`ClusterJobs` owned by this worker (not started)."""
    config = settings.scheduler
    jobs = ClusterJobs(
        parts.store,
        owner=parts.gateway.worker_id,
        timezone=settings.timezone,
        lease_seconds=config.job_lease_seconds,
    )
    if not config.enabled:
        return jobs
    if config.sweep.enabled:
        sweep = Sweep(
            config.sweep,
            timezone=settings.timezone,
            store=parts.store,
            engine=parts.engine,
            directory=parts.directory,
            gateway=parts.gateway,
            tools=parts.tools,
        )
        every = Every(config.sweep.interval_seconds)
        jobs.add(JobSpec("sweep", every, sweep.run, sweep.describe(), acted=Sweep.acted))
    sessions = settings.sessions
    if sessions.idle_reset_minutes is not None or sessions.daily_reset_hour is not None:
        resets = ScheduledResets(
            sessions, config.resets, timezone=settings.timezone, store=parts.store, gateway=parts.gateway
        )
        jobs.add(JobSpec("resets", Every(config.resets.interval_seconds), resets.run, resets.describe()))
    if config.upkeep.enabled:
        hour, minute = parse_clock(config.upkeep.at)
        upkeep = Upkeep(config.upkeep, parts.store)
        jobs.add(
            JobSpec("upkeep", Cron.daily(hour, minute, settings.timezone), upkeep.run, upkeep.describe())
        )
    if config.retention.enabled:
        hour, minute = parse_clock(config.retention.at)
        retention = Retention(config.retention.archived_days, parts.store)
        note = f"deletes archived messages older than {config.retention.archived_days} days"
        jobs.add(JobSpec("retention", Cron.daily(hour, minute, settings.timezone), retention.run, note))
    if parts.tasks is not None:
        jobs.add(JobSpec("tasks", Every(config.tasks.poll_seconds), _fire_tasks(parts.tasks, parts.gateway)))
    return jobs


def _fire_tasks(tasks: TaskBook, gateway: Gateway) -> JobFunc:
    async def fire(now: datetime) -> dict[str, Any]:
        keys = await tasks.fire_due(now)
        for key in dict.fromkeys(keys):
            gateway.wake(key)  # other workers find the runs on their next inbox sweep
        return {"fired": len(keys)} if keys else {}

    return fire
