"""Rate-limit scopes shared by every worker on the database (``gateway.store.rate_ops``), on every engine.

Two :class:`Store` objects over two connections to one database stand for two workers.
"""

from __future__ import annotations

import asyncio
import time

from gateway.store.repository import Store

GLOBAL = ("telegram:global", 0.05)


async def test_reservations_are_spaced_by_the_interval(store: Store) -> None:
    calls = []  # (called at, returned at, wait): the slot is the database's "now" (between the two) + wait
    for _ in range(4):
        called = time.monotonic()
        wait = await store.rate_reserve("telegram", [GLOBAL])
        calls.append((called, time.monotonic(), wait))

    assert calls[0][2] == 0.0
    first_called, first_returned, _ = calls[0]
    for i, (called, returned, wait) in enumerate(calls[1:], start=1):
        # Each slot is i intervals after the first, however long the calls took.
        assert called + wait - first_returned - 1e-3 <= i * 0.05 <= returned + wait - first_called + 1e-3


async def test_a_send_waits_for_the_busiest_of_its_scopes(store: Store) -> None:
    await store.rate_reserve("telegram", [GLOBAL, ("telegram:chat:7", 1.0)])

    other_chat = await store.rate_reserve("telegram", [GLOBAL, ("telegram:chat:8", 1.0)])
    same_chat = await store.rate_reserve("telegram", [GLOBAL, ("telegram:chat:7", 1.0)])

    assert other_chat <= 0.05 + 1e-6  # only the global interval (the calls only shorten it)
    assert 0.5 < same_chat <= 1.0 + 1e-6  # the chat's second message, about a second after its first


async def test_two_workers_together_stay_within_the_limit(store: Store, second: Store) -> None:
    """30 sends from two workers at once at 20/s: together they take 1.5 s, never bunching up."""

    async def send(worker: Store, chat: int) -> float:
        scopes = [("telegram:global", 0.05), (f"telegram:chat:{chat}", 1.0)]
        wait = await worker.rate_reserve("telegram", scopes)
        await asyncio.sleep(wait)
        return time.monotonic()

    sent = sorted(await asyncio.gather(*(send(store if i % 2 else second, i) for i in range(30))))

    assert sent[-1] - sent[0] >= 29 * 0.05 - 0.1
    for i, at in enumerate(sent):  # any half second holds about 10 of them (2 more for timer jitter)
        assert len([t for t in sent[i:] if t - at < 0.5]) <= 12, sent


async def test_a_pause_recorded_by_one_worker_holds_the_other(store: Store, second: Store) -> None:
    await store.rate_pause("telegram", ["telegram:global", "telegram:chat:5"], 2.0)

    wait = await second.rate_reserve("telegram", [GLOBAL, ("telegram:chat:6", 1.0)])

    assert 1.5 < wait <= 2.0
    left = await second.rate_next_at("telegram:global")
    assert left is not None and left > 1.5


async def test_a_pause_never_brings_a_later_slot_back(store: Store) -> None:
    for _ in range(3):
        await store.rate_reserve("telegram", [("telegram:group:-5", 3.0)])  # the next free in ~9 s

    await store.rate_pause("telegram", ["telegram:group:-5"], 1.0)

    left = await store.rate_next_at("telegram:group:-5")
    assert left is not None and left > 8.0
    assert await store.rate_next_at("telegram:group:-6") is None


async def test_idle_scopes_are_pruned_and_a_pruned_scope_is_free(store: Store) -> None:
    await store.rate_reserve("telegram", [("telegram:chat:1", 0.01)])
    await store.rate_pause("telegram", ["telegram:chat:2"], 600.0)  # paused: kept
    await asyncio.sleep(0.05)
    assert await store.rate_prune(idle_seconds=0.0) == 1
    assert await store.rate_next_at("telegram:chat:1") is None
    assert await store.rate_next_at("telegram:chat:2") is not None
    assert await store.rate_reserve("telegram", [("telegram:chat:1", 1.0)]) == 0.0
