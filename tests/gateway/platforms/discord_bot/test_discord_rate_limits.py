"""Discord's limits shared by the cluster: two send-only adapters (two workers) over one database.

discord.py waits out a 429 in the process that met it; with the limits shared, that 429 (seen on
the wire) also pauses the other worker's next post to the same channel, or to any channel when
Discord says the limit is global.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from gateway.platforms.base import OutboundTarget
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from gateway.store.repository import Store
from tests.fakes.discord import FakeDiscord
from tests.gateway.discord_support import make_adapter
from tests.gateway.inbox_recorder import Inbox
from tests.gateway.platforms.rate_support import paused

MESSAGES = "POST /channels/{id}/messages"
GUILD = 9_100
BUSY, QUIET = 9_201, 9_202


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds={GUILD: [BUSY, QUIET]}) as server:
        yield server


async def sender(fake: FakeDiscord, pacer: Store) -> DiscordAdapter:
    adapter = make_adapter(fake, gateway=False, rate_channel_interval_seconds=0.05)
    adapter.share_rate_limits(pacer)
    await adapter.start_sending()
    return adapter


@pytest.mark.parametrize("is_global", [False, True], ids=["channel", "global"])
async def test_a_429_met_by_one_worker_pauses_the_other(
    fake: FakeDiscord, store: Store, second: Store, is_global: bool
) -> None:
    first, other = await sender(fake, store), await sender(fake, second)
    try:
        fake.fail_next(MESSAGES, 429, retry_after=1.0, is_global=is_global)
        hit = asyncio.create_task(first.send(OutboundTarget("discord", str(BUSY)), "met the limit"))
        await paused(second, "discord:global" if is_global else f"discord:channel:{BUSY}", 0.5)
        began = time.monotonic()  # the pause has at least 0.5 s left
        await other.send(OutboundTarget("discord", str(QUIET)), "another channel")
        quiet = time.monotonic() - began
        await other.send(OutboundTarget("discord", str(BUSY)), "the same channel")
        busy = time.monotonic() - began
        await hit
    finally:
        await asyncio.gather(first.stop(), other.stop())
    if is_global:
        assert quiet > 0.45  # the global pause holds every channel
    else:
        assert quiet < 0.45 < busy  # only the channel that met it
    assert sorted(s.content for s in fake.sent) == ["another channel", "met the limit", "the same channel"]


async def test_two_nodes_starting_shards_at_once_identify_one_slot_apart(store: Store, second: Store) -> None:
    # Discord allows one IDENTIFY per 5 s per bot; two nodes each pacing only themselves would
    # identify together and one would be refused (INVALID_SESSION).
    interval = 0.6
    inbox = Inbox()
    async with FakeDiscord(shards=2) as fake:
        one = make_adapter(fake, shard_ids="auto", identify_interval_seconds=interval)
        two = make_adapter(fake, shard_ids="auto", identify_interval_seconds=interval)
        one.share_rate_limits(store)
        two.share_rate_limits(second)
        for adapter in (one, two):
            inbox.adapter = adapter
            await adapter.start(inbox)
        try:
            connected = await asyncio.gather(one.run_shards({0}, 2), two.run_shards({1}, 2))
        finally:
            await one.stop()
            await two.stop()
    assert connected == [{0}, {1}]
    first, later = sorted(fake.identify_times)
    assert later - first >= interval * 0.9, f"identified {later - first:.2f} s apart"
