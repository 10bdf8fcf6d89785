"""Telegram's flood limits shared by the cluster: two send-only adapters (two workers) over one database.

The fake enforces Telegram's limits (``TelegramLimits``, lowered here so a test takes a second)
and answers 429 beyond them, as Telegram does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from gateway.platforms.base import OutboundTarget
from gateway.platforms.telegram_bot.adapter import TelegramAdapter
from gateway.store.repository import Store
from tests.fakes.telegram import FakeTelegram, TelegramLimits
from tests.gateway.platforms.rate_support import paused
from tests.gateway.telegram_support import make_adapter

LIMITS = TelegramLimits(per_second=20, per_chat=(1, 1.0), per_group=(20, 60.0))
RATES = {"rate_per_second": 16.0, "rate_chat_interval_seconds": 1.1, "rate_group_per_minute": 600.0}


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(limits=LIMITS) as server:
        yield server


async def sender(fake: FakeTelegram, pacer: Store | None) -> TelegramAdapter:
    adapter = make_adapter(fake, **RATES)
    if pacer is not None:
        adapter.share_rate_limits(pacer)
    await adapter.start_sending()
    return adapter


async def burst(workers: list[TelegramAdapter], chats: int) -> None:
    """Every worker sends one message to each of its share of ``chats`` private chats, all at once."""
    await asyncio.gather(
        *(
            workers[i % len(workers)].send(OutboundTarget("telegram", str(1000 + i)), f"reply {i}")
            for i in range(chats)
        )
    )


async def test_two_workers_sharing_the_database_stay_within_telegrams_limits(
    fake: FakeTelegram, store: Store, second: Store
) -> None:
    workers = [await sender(fake, store), await sender(fake, second)]
    try:
        await burst(workers, 24)
    finally:
        await asyncio.gather(*(w.stop() for w in workers))
    assert len(fake.sent) == 24
    assert fake.too_many_requests == 0


async def test_workers_that_pace_only_themselves_are_answered_429(fake: FakeTelegram) -> None:
    """What the shared limits replace: each process's own limiter lets its burst through."""
    workers = [await sender(fake, None), await sender(fake, None)]
    try:
        await burst(workers, 24)
    finally:
        await asyncio.gather(*(w.stop() for w in workers))
    assert len(fake.sent) == 24  # waited out and retried, each by the process that got it
    assert fake.too_many_requests > 0


async def test_a_retry_after_seen_by_one_worker_pauses_the_other(
    fake: FakeTelegram, store: Store, second: Store
) -> None:
    first, other = await sender(fake, store), await sender(fake, second)
    try:
        fake.fail_next("sendMessage", 429, retry_after=1)
        hit = asyncio.create_task(first.send(OutboundTarget("telegram", "1"), "hello"))
        await paused(second, "telegram:global", 0.5)  # the first worker has recorded the pause
        began = time.monotonic()
        await other.send(OutboundTarget("telegram", "2"), "another chat")
        waited = time.monotonic() - began
        await hit
    finally:
        await asyncio.gather(first.stop(), other.stop())
    assert 0.4 < waited < 1.5  # the rest of the shared pause, not its own pace (1/16 s)
    assert sorted(s.chat_id for s in fake.sent) == [1, 2]
    assert fake.too_many_requests == 1


async def test_a_groups_retry_after_pauses_that_group_only(
    fake: FakeTelegram, store: Store, second: Store
) -> None:
    first, other = await sender(fake, store), await sender(fake, second)
    try:
        fake.fail_next("sendMessage", 429, retry_after=2)
        hit = asyncio.create_task(first.send(OutboundTarget("telegram", "-100555"), "to the group"))
        await paused(second, "telegram:group:-100555", 1.0)
        began = time.monotonic()
        await other.send(OutboundTarget("telegram", "42"), "a private chat goes on")
        private = time.monotonic() - began
        await other.send(OutboundTarget("telegram", "-100555"), "the group waits")
        group = time.monotonic() - began
        await hit
    finally:
        await asyncio.gather(first.stop(), other.stop())
    assert private < 0.9  # paused, it would have waited more than 1 s
    assert group > 1.0
    assert len(fake.sent) == 3


async def test_a_worker_that_stalls_past_its_send_slots_takes_new_ones(
    fake: FakeTelegram, store: Store
) -> None:
    worker = await sender(fake, store)

    async def stall() -> None:
        await asyncio.sleep(0.4)
        time.sleep(1.0)  # noqa: ASYNC251 (on purpose: the event loop held up, as on a starved machine)

    try:
        await asyncio.gather(burst([worker], 40), stall())
    finally:
        await worker.stop()
    assert len(fake.sent) == 40
    assert fake.too_many_requests == 0  # the sends whose slots passed meanwhile did not all go at once
