"""The in-process queue for SQLite's single writer (gateway/store/db.py WriteLock)."""

from __future__ import annotations

import asyncio

from gateway.store.db import WriteLock


async def test_urgent_waiters_go_first_then_the_others_in_order() -> None:
    lock = WriteLock()
    order: list[str] = []

    async def take(name: str, urgent: bool) -> None:
        async with lock.hold(urgent=urgent):
            order.append(name)
            await asyncio.sleep(0)

    await lock.acquire()
    tasks = [asyncio.create_task(take("a", False)), asyncio.create_task(take("b", False))]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(take("inbox", True)))
    await asyncio.sleep(0)
    lock.release()
    await asyncio.gather(*tasks)
    assert order == ["inbox", "a", "b"]
    assert not lock.locked()


async def test_a_waiter_cancelled_as_it_is_handed_the_lock_passes_it_on() -> None:
    lock = WriteLock()
    await lock.acquire()
    first = asyncio.create_task(lock.acquire())
    second = asyncio.create_task(lock.acquire())
    await asyncio.sleep(0)
    lock.release()  # handed to `first`, which is cancelled before it runs
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.wait_for(second, 1)  # got the lock: nothing deadlocks
    assert lock.locked()
    lock.release()
    assert not lock.locked()
