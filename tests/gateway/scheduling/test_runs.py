"""Scheduled jobs run once per cluster: every worker fires them, one worker runs each occurrence."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gateway.scheduling.runs import ClusterJobs, JobSpec
from gateway.scheduling.scheduler import Every
from gateway.store.db import Database
from gateway.store.repository import Store

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


@pytest.fixture
async def second_store(database: Database) -> AsyncIterator[Store]:
    """Another worker's view of the same database (its own connection pool)."""
    other = Database(database.url)
    await other.connect()
    try:
        yield Store(other)
    finally:
        await other.dispose()


def counting_job(runs: list[tuple[str, datetime]], owner: str, *, seconds: float = 60) -> JobSpec:
    async def run(now: datetime) -> dict[str, Any]:
        runs.append((owner, now))
        await asyncio.sleep(0.01)
        return {"ran": 1}

    return JobSpec("tick", Every(seconds), run)


async def test_two_workers_firing_every_occurrence_at_once_run_each_exactly_once(
    store: Store, second_store: Store
) -> None:
    runs: list[tuple[str, datetime]] = []
    workers = []
    for owner, s in (("a", store), ("b", second_store)):
        jobs = ClusterJobs(s, owner=owner, clock=lambda: T0)
        jobs.add(counting_job(runs, owner))
        workers.append(jobs)

    for minute in range(10):
        now = T0 + timedelta(minutes=minute)
        await asyncio.gather(*(w.run_due("tick", now=now) for w in workers))
        # A late firing of the same occurrence finds it taken.
        await asyncio.gather(*(w.run_due("tick", now=now + timedelta(seconds=30)) for w in workers))

    assert sorted(at for _, at in runs) == [T0 + timedelta(minutes=m) for m in range(10)]
    [state] = await store.job_states()
    assert (state.runs, state.failures, state.last_status) == (10, 0, "ok")


async def lease_expired(store: Store, name: str) -> None:
    for _ in range(200):
        lease = await store.lease_get(name)
        at = T0 + timedelta(minutes=1) if store.db.dialect == "sqlite" else await store.db_now()
        if lease is None or not lease.live(at):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} still live")


async def test_a_worker_that_died_mid_run_does_not_block_the_next_occurrence(
    store: Store, second_store: Store
) -> None:
    # The dead worker claimed the 03:00 run (its lease is short) and never finished it.
    assert await store.job_claim(
        "tick", "dead", now=T0, next_due_at=T0 + timedelta(minutes=1), lease_seconds=0.3
    )
    await lease_expired(store, "job:tick")  # on PostgreSQL by the database's clock
    runs: list[tuple[str, datetime]] = []
    alive = ClusterJobs(second_store, owner="alive", lease_seconds=30, clock=lambda: T0)
    alive.add(counting_job(runs, "alive"))

    outcome = await alive.run_due("tick", now=T0 + timedelta(minutes=1))

    assert outcome is not None and outcome.status == "ok"
    assert runs == [("alive", T0 + timedelta(minutes=1))]
    lease = await store.lease_get("job:tick")
    assert lease is not None and lease.generation == 2


async def test_a_run_still_holding_its_lease_is_not_overlapped(store: Store, second_store: Store) -> None:
    assert await store.job_claim(
        "tick", "slow", now=T0, next_due_at=T0 + timedelta(minutes=1), lease_seconds=300
    )
    runs: list[tuple[str, datetime]] = []
    other = ClusterJobs(second_store, owner="other", clock=lambda: T0)
    other.add(counting_job(runs, "other"))

    assert await other.run_due("tick", now=T0 + timedelta(minutes=1)) is None
    assert runs == []


async def test_a_failing_job_is_recorded_and_the_next_occurrence_still_runs(store: Store) -> None:
    calls = 0

    async def flaky(now: datetime) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("disk on fire")
        return {"fixed": 1}

    jobs = ClusterJobs(store, owner="w", clock=lambda: T0)
    jobs.add(JobSpec("flaky", Every(60), flaky))

    first = await jobs.run_due("flaky", now=T0)
    second = await jobs.run_due("flaky", now=T0 + timedelta(minutes=1))

    assert first is not None and first.status == "failed" and "disk on fire" in (first.error or "")
    assert second is not None and second.status == "ok"
    [state] = await store.job_states()
    assert (state.runs, state.failures, state.last_result) == (2, 1, {"fixed": 1})
    assert state.lease is not None and not state.lease.live(datetime.now(UTC))


async def test_two_running_schedulers_on_one_database_never_run_an_occurrence_twice(
    store: Store, second_store: Store
) -> None:
    starts: list[float] = []

    def spec() -> JobSpec:
        async def run(now: datetime) -> dict[str, Any]:
            starts.append(time.monotonic())
            return {}

        return JobSpec("tick", Every(1.0), run)

    workers = [ClusterJobs(s, owner=o, lease_seconds=5) for o, s in (("a", store), ("b", second_store))]
    for w in workers:
        w.add(spec())
        await w.start()
        await asyncio.sleep(0.4)  # the two workers' timers are out of phase
    await asyncio.sleep(4.5)
    for w in workers:
        await w.stop()

    # Each firing of either worker would run if claims did not exclude each other: about 9 firings.
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert 2 <= len(starts) <= 6
    assert min(gaps) >= 0.85, gaps


def job_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("gateway.") and r.levelno >= level]


async def test_a_run_that_found_nothing_logs_at_debug_only(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def idle(now: datetime) -> dict[str, Any]:
        return {}  # what the tasks job reports when nothing is due, every 10 s

    jobs = ClusterJobs(store, owner="w", clock=lambda: T0)
    jobs.add(JobSpec("idle", Every(10), idle))

    assert await jobs.run_due("idle", now=T0) is not None

    assert job_lines(caplog, logging.INFO) == []
    assert [line for line in job_lines(caplog, logging.DEBUG) if line.startswith("job idle finished")]


async def test_a_run_that_did_something_logs_its_counts_at_info(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    jobs = ClusterJobs(store, owner="w", clock=lambda: T0)
    jobs.add(counting_job([], "w"))

    await jobs.run_due("tick", now=T0)

    [line] = job_lines(caplog, logging.INFO)
    assert line.startswith("job tick finished in ") and line.endswith(": ran 1")
