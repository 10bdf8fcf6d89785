"""The scheduler in the admin app: ``/api/status`` (jobs) and the jobs' metrics.

The admin runs as its own process, so everything here is read from SQL: what the workers'
jobs last did (``scheduler_jobs`` and their leases) and the tasks users set.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.store.job_ops import JobState
from gateway.store.repository import Store


def job_json(job: JobState, now: datetime) -> dict[str, Any]:
    data = dataclasses.asdict(job)
    lease = job.lease
    data["lease"] = None if lease is None else {**dataclasses.asdict(lease), "live": lease.live(now)}
    # A run marked running whose lease ran out was abandoned by a worker that died.
    data["abandoned"] = job.last_status == "running" and (lease is None or not lease.live(now))
    return data


def scheduler_router(store: Store) -> APIRouter:
    """``/api/status``."""
    router = APIRouter(prefix="/api")

    @router.get("/status")
    async def status() -> dict[str, Any]:
        now = datetime.now(UTC)
        jobs = await store.job_states()
        return {
            "now": now,
            "scheduler": {"jobs": [job_json(j, now) for j in jobs]},
        }

    return router


class _Snapshot(Collector):
    """One scrape's values, as Prometheus metric families."""

    def __init__(self, jobs: list[JobState]) -> None:
        self._jobs = jobs

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
        return [runs, failures, last_ok, last_run, duration, counts]


async def scheduler_metrics(store: Store) -> bytes:
    """The scheduler's metrics in the Prometheus text format (appended to the admin's ``/metrics``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(await store.job_states()))
    return generate_latest(registry)
