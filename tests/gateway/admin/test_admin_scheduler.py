"""The scheduler in the admin app: jobs in /api/status, their outcomes in /metrics."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from prometheus_client.parser import text_string_to_metric_families

from gateway.store.repository import Store
from gateway.store.task_ops import NewTask
from tests.gateway.admin_support import admin_client

T0 = datetime(2025, 12, 1, 3, 0, tzinfo=UTC)  # in the past: leases are judged by the real clock


async def finished_run(store: Store, name: str, result: dict[str, int], *, failed: bool = False) -> None:
    assert await store.job_claim(name, "w1", now=T0, next_due_at=T0 + timedelta(minutes=10), lease_seconds=60)
    await store.job_finish(
        name,
        "w1",
        status="failed" if failed else "ok",
        result=result,
        error="boom" if failed else None,
        duration_ms=1500,
        now=T0 + timedelta(seconds=2),
    )


async def test_status_lists_every_job_with_its_last_outcome_and_an_abandoned_run(store: Store) -> None:
    await store.job_register("upkeep", schedule="cron 30 4 * * * (UTC)", next_due_at=T0)
    await finished_run(store, "sweep", {"compacted": 2, "skipped": 5})
    # A worker died mid-run: its run is "running" and its lease long expired.
    assert await store.job_claim("tasks", "dead", now=T0, next_due_at=T0, lease_seconds=0.2)
    for _ in range(100):  # PostgreSQL judges the lease by its own clock: until that passed it
        lease = await store.lease_get("job:tasks")
        if lease is not None and not lease.live(await store.db_now()):
            break
        await asyncio.sleep(0.02)

    async with admin_client(store) as client:
        response = await client.get("/api/status")

    assert response.status_code == 200
    jobs = {job["name"]: job for job in response.json()["scheduler"]["jobs"]}
    assert set(jobs) == {"sweep", "tasks", "upkeep"}
    assert jobs["sweep"]["last_status"] == "ok"
    assert jobs["sweep"]["last_result"] == {"compacted": 2, "skipped": 5}
    assert jobs["sweep"]["runs"] == 1 and jobs["sweep"]["lease"]["live"] is False
    assert jobs["tasks"]["abandoned"] is True and jobs["tasks"]["last_owner"] == "dead"
    assert jobs["upkeep"]["last_status"] is None and jobs["upkeep"]["schedule"].startswith("cron")


async def test_status_needs_the_admin_token(store: Store) -> None:
    async with admin_client(store, authed=False) as client:
        response = await client.get("/api/status")
    assert response.status_code == 401


async def test_metrics_export_job_runs_failures_and_last_counts(store: Store) -> None:
    await finished_run(store, "sweep", {"compacted": 2})
    await finished_run(store, "upkeep", {}, failed=True)

    async with admin_client(store) as client:
        response = await client.get("/metrics")

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    assert samples[("hygieia_scheduler_job_runs_total", (("job", "sweep"),))] == 1
    assert samples[("hygieia_scheduler_job_failures_total", (("job", "upkeep"),))] == 1
    assert samples[("hygieia_scheduler_job_last_success", (("job", "sweep"),))] == 1
    assert samples[("hygieia_scheduler_job_last_success", (("job", "upkeep"),))] == 0
    assert samples[("hygieia_scheduler_job_last_count", (("item", "compacted"), ("job", "sweep")))] == 2
    assert samples[("hygieia_scheduler_job_last_duration_seconds", (("job", "sweep"),))] == 1.5
    assert samples[("hygieia_sessions", (("state", "current"),))] == 0  # the store's own gauges stay


async def test_admins_see_every_chats_tasks_and_their_counts(store: Store) -> None:
    for chat in ("42", "77"):
        task = NewTask(
            session_key=f"telegram:dm:{chat}",
            platform="telegram",
            chat_id=chat,
            thread_id=None,
            session_id=None,
            prompt=f"task of {chat}",
            kind="every",
            spec="3600",
            timezone="UTC",
            next_run_at=T0 + timedelta(hours=1),
        )
        assert await store.task_create(task, now=T0, max_active=5) is not None
    [cancel] = await store.task_list(session_key="telegram:dm:77")
    await store.task_cancel("telegram:dm:77", cancel.id, now=T0)

    async with admin_client(store) as client:
        active = (await client.get("/api/tasks")).json()
        every = (await client.get("/api/tasks", params={"status": "all"})).json()
        of_77 = (await client.get("/api/tasks", params={"status": "all", "key": "telegram:dm:77"})).json()
        status = (await client.get("/api/status")).json()
        metrics = (await client.get("/metrics")).text

    assert [t["chat_id"] for t in active] == ["42"]
    assert sorted(t["prompt"] for t in every) == ["task of 42", "task of 77"]
    assert [(t["chat_id"], t["status"]) for t in of_77] == [("77", "cancelled")]
    assert status["tasks"] == {"active": 1, "cancelled": 1}
    assert 'hygieia_scheduled_tasks{status="active"} 1.0' in metrics
