"""The scheduler in the admin app: ``/api/status`` (jobs), ``/api/tasks`` (every chat's tasks), metrics.

The admin runs as its own process, so everything here is read from SQL: what the workers'
jobs last did (``scheduler_jobs`` and their leases) and the tasks users set.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.store.job_ops import JobState
from gateway.store.repository import Store
from gateway.store.task_ops import TaskRecord

TaskFilter = Literal["active", "done", "cancelled", "all"]
Key = Annotated[str | None, Query(max_length=255, pattern=r"^[^\x00]*$")]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=1_000_000_000)]


def job_json(job: JobState, now: datetime) -> dict[str, Any]:
    data = dataclasses.asdict(job)
    lease = job.lease
    data["lease"] = None if lease is None else {**dataclasses.asdict(lease), "live": lease.live(now)}
    # A run marked running whose lease ran out was abandoned by a worker that died.
    data["abandoned"] = job.last_status == "running" and (lease is None or not lease.live(now))
    return data


def task_json(task: TaskRecord) -> dict[str, Any]:
    return dataclasses.asdict(task)


def scheduler_router(store: Store) -> APIRouter:
    """``/api/status`` and ``/api/tasks``."""
    router = APIRouter(prefix="/api")

    @router.get("/status")
    async def status() -> dict[str, Any]:
        now = await store.db_now()  # job leases expire on the database's clock
        jobs = await store.job_states()
        return {
            "now": now,
            "scheduler": {"jobs": [job_json(j, now) for j in jobs]},
            "tasks": await store.task_counts(),
        }

    @router.get("/tasks")
    async def tasks(
        status: TaskFilter = "active", key: Key = None, limit: Limit = 100, offset: Offset = 0
    ) -> list[dict[str, Any]]:
        """Every chat's tasks (admins see them all; a chat sees only its own)."""
        rows = await store.task_list(
            status=None if status == "all" else status, session_key=key, limit=limit, offset=offset
        )
        return [task_json(t) for t in rows]

    return router


class _Snapshot(Collector):
    """One scrape's values, as Prometheus metric families."""

    def __init__(self, jobs: list[JobState], tasks: dict[str, int]) -> None:
        self._jobs = jobs
        self._tasks = tasks

    def collect(self) -> list[Metric]:
        runs = CounterMetricFamily("hygieia_scheduler_job_runs", "Runs of a scheduled job.", labels=["job"])
        failures = CounterMetricFamily(
            "hygieia_scheduler_job_failures", "Runs of a scheduled job that failed.", labels=["job"]
        )
        last_ok = GaugeMetricFamily(
            "hygieia_scheduler_job_last_success", "1 when the job's last run succeeded.", labels=["job"]
        )
        last_run = GaugeMetricFamily(
            "hygieia_scheduler_job_last_run_timestamp_seconds", "When the job last started.", labels=["job"]
        )
        duration = GaugeMetricFamily(
            "hygieia_scheduler_job_last_duration_seconds", "How long the job's last run took.", labels=["job"]
        )
        counts = GaugeMetricFamily(
            "hygieia_scheduler_job_last_count",
            "The counts the job's last run reported (sessions compacted, rows pruned ...).",
            labels=["job", "item"],
        )
        for job in self._jobs:
            runs.add_metric([job.name], job.runs)
            failures.add_metric([job.name], job.failures)
            last_ok.add_metric([job.name], 1.0 if job.last_status == "ok" else 0.0)
            if job.last_started_at is not None:
                last_run.add_metric([job.name], job.last_started_at.timestamp())
            if job.last_duration_ms is not None:
                duration.add_metric([job.name], job.last_duration_ms / 1000)
            for item, value in job.last_result.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    counts.add_metric([job.name, str(item)], float(value))
        tasks = GaugeMetricFamily(
            "hygieia_scheduled_tasks", "Reminders and recurring tasks, by status.", labels=["status"]
        )
        for status in ("active", "done", "cancelled"):
            tasks.add_metric([status], self._tasks.get(status, 0))
        return [runs, failures, last_ok, last_run, duration, counts, tasks]


async def scheduler_metrics(store: Store) -> bytes:
    """The scheduler's metrics in the Prometheus text format (appended to the admin's ``/metrics``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(await store.job_states(), await store.task_counts()))
    return generate_latest(registry)
