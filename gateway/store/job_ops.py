"""The cluster-wide state of scheduled jobs: when each is next due, and how its last run went.

Every worker's scheduler fires every job; :meth:`JobOps.job_claim` lets exactly one of them
run each due occurrence. In one transaction it checks that the job is due, takes the job's
lease (``job:<name>``, see :mod:`gateway.store.lease_ops`) and moves ``next_due_at`` past
now, so a second worker firing for the same occurrence finds it not due. The lease keeps two
runs of one job from overlapping and is renewed while the job runs; a worker that dies
mid-run stops renewing, and the next occurrence runs elsewhere once the lease has expired.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.store.columns import clean_json, clean_text
from gateway.store.lease_ops import Lease, LeaseOps, acquire_in, release_in, serialize
from gateway.store.models import scheduler_jobs

JobStatus = Literal["running", "ok", "failed"]
LEASE_PREFIX = "job:"


def lease_name(job: str) -> str:
    return f"{LEASE_PREFIX}{job}"


@dataclass(frozen=True, slots=True)
class JobState:
    """One job as the cluster sees it; ``lease`` is its current (possibly expired) lease."""

    name: str
    schedule: str
    next_due_at: datetime | None
    last_started_at: datetime | None
    last_finished_at: datetime | None
    last_status: JobStatus | None
    last_owner: str | None
    last_result: dict[str, Any] = field(default_factory=dict)
    last_error: str | None = None
    last_duration_ms: int | None = None
    runs: int = 0
    failures: int = 0
    lease: Lease | None = None


async def _job_row(s: AsyncSession, name: str) -> dict[str, Any] | None:
    row = (await s.execute(select(scheduler_jobs).where(scheduler_jobs.c.name == name))).mappings().first()
    return None if row is None else dict(row)


class JobOps(LeaseOps):
    """Claim, finish and list scheduled jobs."""

    async def job_register(self, name: str, *, schedule: str, next_due_at: datetime) -> None:
        """Make the job known (the admin lists it before its first run). An existing job takes the
        new schedule text and the earlier of its stored and the given due time (the schedule
        may have changed while no worker ran)."""
        async with self._tx() as s:
            await serialize(s, self.db.dialect, lease_name(name))
            row = await _job_row(s, name)
            if row is None:
                await s.execute(
                    insert(scheduler_jobs).values(
                        name=name, schedule=schedule, next_due_at=next_due_at, runs=0, failures=0
                    )
                )
                return
            stored = row["next_due_at"]
            due = next_due_at if stored is None else min(stored, next_due_at)
            await s.execute(
                update(scheduler_jobs)
                .where(scheduler_jobs.c.name == name)
                .values(schedule=schedule, next_due_at=due)
            )

    async def job_claim(
        self,
        name: str,
        owner: str,
        *,
        now: datetime,
        next_due_at: datetime,
        lease_seconds: float,
        early: timedelta = timedelta(0),
    ) -> bool:
        """Claim the run of ``name`` due at or before ``now + early``; False when it is not due or
        another worker's run still holds the lease. A claim moves the next occurrence to
        ``next_due_at`` and leases the job to ``owner``."""
        async with self._tx() as s:
            await serialize(s, self.db.dialect, lease_name(name))
            row = await _job_row(s, name)
            due = None if row is None else row["next_due_at"]
            if due is not None and due > now + early:
                return False
            # The occurrence is judged by the firing node's clock (a schedule is wall-clock time);
            # the lease that keeps two runs apart by the database's.
            at = await self.lease_now(s, now)
            lease = await acquire_in(
                s, self.db.dialect, lease_name(name), owner, ttl_seconds=lease_seconds, now=at
            )
            if lease is None:
                return False
            values = {
                "next_due_at": next_due_at,
                "last_started_at": now,
                "last_status": "running",
                "last_owner": owner,
            }
            if row is None:
                await s.execute(insert(scheduler_jobs).values(name=name, runs=0, failures=0, **values))
            else:
                await s.execute(update(scheduler_jobs).where(scheduler_jobs.c.name == name).values(**values))
            return True

    async def job_finish(
        self,
        name: str,
        owner: str,
        *,
        status: Literal["ok", "failed"],
        result: dict[str, Any],
        error: str | None,
        duration_ms: int,
        now: datetime | None = None,
    ) -> None:
        """Record the outcome of ``owner``'s run and release the job's lease."""
        now = now or self._clock()
        async with self._tx() as s:
            await serialize(s, self.db.dialect, lease_name(name))
            await s.execute(
                update(scheduler_jobs)
                .where(scheduler_jobs.c.name == name)
                .values(
                    last_finished_at=now,
                    last_status=status,
                    last_owner=owner,
                    last_result=clean_json(result),
                    last_error=None if error is None else clean_text(error)[:2000],
                    last_duration_ms=duration_ms,
                    runs=scheduler_jobs.c.runs + 1,
                    failures=scheduler_jobs.c.failures + (1 if status == "failed" else 0),
                )
            )
            await release_in(s, lease_name(name), owner, now=await self.lease_now(s, now))

    async def job_states(self) -> list[JobState]:
        """Every known job, by name, with its lease."""
        held = {lease.name: lease for lease in await self.lease_list(LEASE_PREFIX)}
        async with self._tx(write=False) as s:
            rows = (await s.execute(select(scheduler_jobs).order_by(scheduler_jobs.c.name))).mappings()
            return [
                JobState(
                    name=r["name"],
                    schedule=r["schedule"],
                    next_due_at=r["next_due_at"],
                    last_started_at=r["last_started_at"],
                    last_finished_at=r["last_finished_at"],
                    last_status=r["last_status"],
                    last_owner=r["last_owner"],
                    last_result=dict(r["last_result"] or {}),
                    last_error=r["last_error"],
                    last_duration_ms=r["last_duration_ms"],
                    runs=int(r["runs"]),
                    failures=int(r["failures"]),
                    lease=held.get(lease_name(r["name"])),
                )
                for r in rows
            ]
