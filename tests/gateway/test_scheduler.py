"""The scheduler hook: start, run a coroutine job, stop."""

from __future__ import annotations

import asyncio

from gateway.scheduler import Scheduler


async def test_an_interval_job_runs_while_started_and_not_after_stop() -> None:
    ran: list[int] = []

    async def job() -> None:
        ran.append(1)

    scheduler = Scheduler()
    scheduler.add_interval("tick", job, seconds=0.05)
    await scheduler.start()
    await asyncio.sleep(0.3)
    await scheduler.stop()
    await asyncio.sleep(0.05)  # a run already handed to the loop may still finish
    count = len(ran)
    await asyncio.sleep(0.2)

    assert count >= 2 and len(ran) == count
    assert not scheduler.running
