"""The jobs ``hygieia run`` schedules, assembled from the configuration (``scheduler:`` keys)."""

from __future__ import annotations

from gateway.config import Settings
from gateway.dispatch import Gateway
from gateway.jobs import ClusterJobs
from gateway.store.repository import Store


def build_jobs(settings: Settings, *, store: Store, gateway: Gateway) -> ClusterJobs:
    """Every configured job, on a :class:`ClusterJobs` owned by this worker (not started)."""
    config = settings.scheduler
    jobs = ClusterJobs(
        store, owner=gateway.worker_id, timezone=settings.timezone, lease_seconds=config.job_lease_seconds
    )
    if not config.enabled:
        return jobs
    return jobs
