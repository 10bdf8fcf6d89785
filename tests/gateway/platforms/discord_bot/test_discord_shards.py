"""Discord sharding with the real discord.py against the fake gateway, which routes each guild's events
to the one connection whose IDENTIFY named its shard ((guild_id >> 22) % shard_count), DMs to shard 0."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import aiohttp
import pytest

from gateway.config import load_settings
from gateway.errors import AdapterError
from gateway.platforms.base import OutboundTarget
from tests.fakes.discord import FakeDiscord
from tests.gateway.discord_support import dm, in_guild, running
from tests.gateway.inbox_recorder import Inbox

BASE_GUILD = 1_300_000_000_000_000_100


def guilds_on(shard_count: int, per_shard: int = 2) -> dict[int, int]:
    """Guild id -> its shard: ``per_shard`` guilds on each shard (Discord's routing rule)."""
    found: dict[int, int] = {}
    step = 0
    while len(found) < shard_count * per_shard:
        guild = BASE_GUILD + (step << 22)
        shard = (guild >> 22) % shard_count
        if sum(1 for s in found.values() if s == shard) < per_shard:
            found[guild] = shard
        step += 1
    return found


def channel_of(guild: int) -> int:
    return guild + 1


async def test_two_processes_with_disjoint_shards_each_receive_only_their_guilds() -> None:
    shard_of = guilds_on(2)
    inbox_0, inbox_1 = Inbox(), Inbox()
    async with (
        FakeDiscord(guilds={g: [channel_of(g)] for g in shard_of}) as fake,
        running(fake, inbox_0, shard_ids=[0], shard_count=2),
        running(fake, inbox_1, shard_ids=[1], shard_count=2),
    ):
        sent = [in_guild(fake, f"to {g}", guild_id=g, channel_id=channel_of(g)) for g in shard_of]
        sent.append(dm(fake, "a DM"))
        await asyncio.sleep(0.3)  # anything routed twice would have arrived by now
        received = inbox_0.messages + inbox_1.messages

    assert sorted(p["shard"] for p in fake.identify_payloads) == [[0, 2], [1, 2]]
    ids = Counter(m.platform_message_id for m in received)
    assert set(ids) == {p["id"] for p in sent} and max(ids.values()) == 1, "each message exactly once"
    expected_0 = {f"to {g}" for g, s in shard_of.items() if s == 0} | {"a DM"}
    expected_1 = {f"to {g}" for g, s in shard_of.items() if s == 1}
    assert {m.text for m in inbox_0.messages} == expected_0  # the DM goes to shard 0
    assert {m.text for m in inbox_1.messages} == expected_1


async def test_the_fake_gateway_refuses_a_shard_outside_the_count_and_advises_a_count() -> None:
    async with FakeDiscord(shards=3) as fake, aiohttp.ClientSession() as http:
        async with http.ws_connect(fake.gateway_url) as ws:
            await ws.receive_json()  # HELLO
            identify = {"token": fake.token, "intents": 0, "properties": {}, "shard": [2, 2]}
            await ws.send_json({"op": 2, "d": identify})
            closed = await ws.receive()
        headers = {"Authorization": f"Bot {fake.token}"}
        async with http.get(f"{fake.api_base}/gateway/bot", headers=headers) as response:
            advice = json.loads(await response.text())
    assert (closed.type, ws.close_code) == (aiohttp.WSMsgType.CLOSE, 4010)
    assert advice["shards"] == 3


async def test_auto_mode_connects_only_the_shards_it_is_given_and_moves_one_without_touching_others() -> None:
    shard_of = guilds_on(4, per_shard=1)
    by_shard = {s: g for g, s in shard_of.items()}
    inbox = Inbox()
    async with (
        FakeDiscord(guilds={g: [channel_of(g)] for g in shard_of}, shards=4) as fake,
        running(fake, inbox, shard_ids="auto", identify_interval_seconds=0) as adapter,
    ):
        assert fake.connected_shards() == []  # started: REST only, no shard until claimed
        assert await adapter.recommended_shard_count() == 4
        [reply_id] = await adapter.send(OutboundTarget("discord", str(channel_of(by_shard[3]))), "hello")

        assert await adapter.run_shards({0, 2}, 4) == {0, 2}
        assert fake.connected_shards() == [(0, 4), (2, 4)]
        assert await adapter.run_shards({2, 3}, 4) == {2, 3}
        assert fake.connected_shards() == [(2, 4), (3, 4)]
        for shard in range(4):
            in_guild(
                fake, f"to shard {shard}", guild_id=by_shard[shard], channel_id=channel_of(by_shard[shard])
            )
        await inbox.wait_for(2)
        await asyncio.sleep(0.2)

    assert reply_id and fake.sent[0].content == "hello"
    assert fake.identify_count == 3, "shard 2 stayed connected while 0 went and 3 came"
    assert sorted(m.text for m in inbox.messages) == ["to shard 2", "to shard 3"]
    assert fake.connected_shards() == []


async def test_run_shards_needs_auto_mode() -> None:
    async with FakeDiscord() as fake, running(fake) as adapter:
        with pytest.raises(AdapterError, match="auto"):
            await adapter.run_shards({0}, 1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("auto", "auto"), ("AUTO", "auto"), ("0,2", [0, 2]), ("[1, 3]", [1, 3]), ("3", [3])],
)
def test_shard_ids_env_forms(monkeypatch: pytest.MonkeyPatch, value: str, expected: object) -> None:
    monkeypatch.setenv("HYGIEIA_DISCORD__SHARD_IDS", value)
    monkeypatch.setenv("HYGIEIA_DISCORD__SHARD_COUNT", "4")
    discord = load_settings().discord
    assert (discord.shard_ids, discord.shard_count) == (expected, 4)
    assert discord.auto_shards == (expected == "auto")


async def test_a_shard_connect_cancelled_midway_leaves_no_connection_behind() -> None:
    # A stop can cancel a claim round while a shard connects; a connection left open then belongs to
    # nobody and keeps receiving the shard's events after another node claimed it (found by the
    # shard_failover bench: two sessions on one shard).
    async with (
        FakeDiscord() as fake,
        running(fake, shard_ids="auto", identify_interval_seconds=0, guild_ready_timeout=1.0) as adapter,
    ):
        connecting = asyncio.create_task(adapter.run_shards({0}, 1))
        for _ in range(1000):  # until identified; READY then waits out guild_ready_timeout
            if fake.identify_count:
                break
            await asyncio.sleep(0.005)
        connecting.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        await asyncio.sleep(0.2)
        assert fake.connected_shards() == []
        assert await adapter.run_shards({0}, 1) == {0}  # and the shard can be connected again
