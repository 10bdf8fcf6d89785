"""Automatic Discord sharding: intake nodes claim disjoint shards through the database (named leases),
with the real discord.py adapters against the fake gateway, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta

from sqlalchemy import insert
from sqlalchemy.engine import make_url

from agent.clock import utcnow
from gateway.cluster.shard_claims import ShardClaimer, held_by
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from gateway.store.db import Database
from gateway.store.models import leases
from gateway.store.repository import Store
from tests.fakes.discord import FakeDiscord
from tests.fakes.tcp_cut import CuttableRelay
from tests.gateway.discord_support import dm, in_guild, make_adapter
from tests.gateway.inbox_recorder import Inbox
from tests.gateway.platforms.discord_bot.test_discord_shards import channel_of, guilds_on
from tests.store.engines import only

# Each shard's client logs in (GET /users/@me, /oauth2/applications/@me): with the fake's default
# bucket (5 per 5 s) discord.py would rightly wait out 429s and these tests take seconds longer.
LOGINS = (100, 5.0)


class Node:
    """One intake node: its adapter (auto mode), what it received, and its claimer."""

    def __init__(self, name: str, adapter: DiscordAdapter, claimer: ShardClaimer) -> None:
        self.name, self.adapter, self.claimer = name, adapter, claimer
        self.inbox = Inbox()

    async def crash(self) -> None:
        """Die without a word: connections drop, claims are neither renewed nor released."""
        task = self.claimer._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.adapter.stop()


@asynccontextmanager
async def cluster(
    fake: FakeDiscord,
    store: Store,
    names: list[str],
    *,
    shard_count: int | None,
    ttl: float = 30.0,
    claims_per_round: int = 8,
) -> AsyncIterator[list[Node]]:
    """Nodes that may claim several shards a round (the default is one, pacing Discord's identify
    limit; see the last test), so that a test's rounds read as the share each node ends with."""
    async with AsyncExitStack() as stack:
        nodes = []
        for name in names:
            adapter = make_adapter(fake, shard_ids="auto", identify_interval_seconds=0)
            claimer = ShardClaimer(
                store,
                adapter,
                shard_count=shard_count,
                ttl_seconds=ttl,
                node=name,
                claims_per_round=claims_per_round,
            )
            node = Node(name, adapter, claimer)
            await adapter.start(node.inbox)
            stack.push_async_callback(adapter.stop)
            stack.push_async_callback(claimer.stop)
            nodes.append(node)
        yield nodes


def push_everywhere(fake: FakeDiscord, shard_of: dict[int, int]) -> list[str]:
    ids = [
        in_guild(fake, f"to shard {s}", guild_id=g, channel_id=channel_of(g))["id"]
        for g, s in shard_of.items()
    ]
    return [*ids, dm(fake, "a DM")["id"]]


async def test_nodes_claim_disjoint_shards_and_every_message_arrives_once(store: Store) -> None:
    shard_of = guilds_on(4, per_shard=1)
    async with (
        FakeDiscord(guilds={g: [channel_of(g)] for g in shard_of}, rate_limit=LOGINS) as fake,
        cluster(fake, store, ["a", "b"], shard_count=4) as (a, b),
    ):
        assert await a.claimer.claim_round() == {0, 1, 2, 3}  # alone: everything
        assert await b.claimer.claim_round() == set()  # its share is 2, but nothing is free yet
        assert await a.claimer.claim_round() == {0, 1}  # two nodes now: a gives up its excess
        assert await b.claimer.claim_round() == {2, 3}  # which b picks up
        assert fake.connected_shards() == [(0, 4), (1, 4), (2, 4), (3, 4)]  # each shard once
        assert held_by(await store.lease_list("discord-shard:"), utcnow()) == {"a": [0, 1], "b": [2, 3]}

        sent = push_everywhere(fake, shard_of)
        await asyncio.sleep(0.3)

    received = Counter(m.platform_message_id for m in a.inbox.messages + b.inbox.messages)
    assert set(received) == set(sent) and max(received.values()) == 1
    assert sorted(m.text for m in a.inbox.messages) == ["a DM", "to shard 0", "to shard 1"]
    assert sorted(m.text for m in b.inbox.messages) == ["to shard 2", "to shard 3"]


async def test_a_dead_nodes_shards_are_taken_over_once_its_claims_expire(store: Store) -> None:
    shard_of = guilds_on(2, per_shard=1)
    ttl = 1.5
    async with (
        FakeDiscord(guilds={g: [channel_of(g)] for g in shard_of}, rate_limit=LOGINS) as fake,
        cluster(fake, store, ["a", "b"], shard_count=2, ttl=ttl) as (a, b),
    ):
        await a.claimer.claim_round()
        await b.claimer.claim_round()
        await a.claimer.claim_round()
        await b.claimer.start()  # from here b renews and claims every ttl/3 on its own
        assert (a.claimer.held, b.claimer.held) == ({0}, {1})

        await a.crash()
        claim = await store.lease_get("discord-shard:0/2")
        assert claim is not None and claim.owner == "a" and claim.live(utcnow())
        assert b.claimer.held == {1}, "a's claim is still live: b must not take shard 0 yet"
        while fake.connected_shards() != [(0, 2), (1, 2)]:
            assert utcnow() < claim.expires_at + timedelta(seconds=3), "shard 0 was never taken over"
            await asyncio.sleep(0.02)
        taken = await store.lease_get("discord-shard:0/2")
        assert b.claimer.held == {0, 1}

        sent = push_everywhere(fake, shard_of)
        await b.inbox.wait_for(3)
        await asyncio.sleep(0.2)

    # Not before a's claim expired, and within one claim round (ttl / 3) after it.
    assert taken is not None and (taken.owner, taken.generation) == ("b", claim.generation + 1)
    assert claim.expires_at <= taken.acquired_at <= claim.expires_at + timedelta(seconds=ttl / 3 + 0.5)
    assert Counter(m.platform_message_id for m in b.inbox.messages) == Counter(sent)
    assert a.inbox.messages == []


async def test_a_stopped_node_releases_its_shards_for_an_immediate_takeover(store: Store) -> None:
    async with (
        FakeDiscord(rate_limit=LOGINS) as fake,
        cluster(fake, store, ["a", "b"], shard_count=2) as (a, b),
    ):
        await a.claimer.claim_round()
        await b.claimer.claim_round()
        await a.claimer.claim_round()
        await b.claimer.claim_round()
        await a.claimer.stop()  # ttl is 30 s: only the release lets b in now
        assert a.claimer.held == set()
        assert await b.claimer.claim_round() == {0, 1}
        assert fake.connected_shards() == [(0, 2), (1, 2)]


async def test_a_node_set_for_another_count_waits_until_the_cluster_is_gone(store: Store) -> None:
    async with (
        FakeDiscord(rate_limit=LOGINS) as fake,
        cluster(fake, store, ["old"], shard_count=2) as (old,),
        cluster(fake, store, ["new"], shard_count=4) as (new,),
    ):
        assert await old.claimer.claim_round() == {0, 1}
        assert await new.claimer.claim_round() == set()  # 4 shards would overlap the live 2
        assert fake.connected_shards() == [(0, 2), (1, 2)]
        await old.claimer.stop()
        assert await new.claimer.claim_round() == {0, 1, 2, 3}
        assert fake.connected_shards() == [(0, 4), (1, 4), (2, 4), (3, 4)]


async def test_without_a_count_discord_advises_and_later_nodes_follow_the_cluster(store: Store) -> None:
    async with (
        FakeDiscord(shards=3, rate_limit=LOGINS) as fake,
        cluster(fake, store, ["a"], shard_count=None) as (a,),
    ):
        assert await a.claimer.claim_round() == {0, 1, 2}  # GET /gateway/bot said 3
        fake.recommended_shards = 5  # the advice changes while the cluster runs on 3
        async with cluster(fake, store, ["b"], shard_count=None) as (b,):
            await b.claimer.claim_round()
            await a.claimer.claim_round()
            await b.claimer.claim_round()
            assert b.claimer.shard_count == 3
            assert a.claimer.held | b.claimer.held == {0, 1, 2}
            assert not a.claimer.held & b.claimer.held
            assert sorted(fake.connected_shards()) == [(0, 3), (1, 3), (2, 3)]


async def test_by_default_a_node_claims_one_shard_a_round(store: Store) -> None:
    # Each connect waits its turn at Discord's identify limit: one claim a round keeps a round short,
    # so renewals are never held up behind a queue of connects.
    async with FakeDiscord(rate_limit=LOGINS) as fake:
        adapter = make_adapter(fake, shard_ids="auto", identify_interval_seconds=0)
        claimer = ShardClaimer(store, adapter, shard_count=3, ttl_seconds=30, node="solo")
        await adapter.start(Inbox())
        try:
            rounds = [set(await claimer.claim_round()) for _ in range(4)]
        finally:
            await claimer.stop()
            await adapter.stop()
    assert rounds == [{0}, {0, 1}, {0, 1, 2}, {0, 1, 2}]


@only("postgresql")
async def test_a_node_cut_off_from_the_database_disconnects_before_its_claims_expire(
    db_url: str, store: Store
) -> None:
    url = make_url(db_url)
    ttl = 3.0
    async with (
        CuttableRelay(url.host or "127.0.0.1", url.port or 5432) as relay,
        Database(url.set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False)) as db,
        FakeDiscord(rate_limit=LOGINS) as fake,
        cluster(fake, Store(db), ["a"], shard_count=2, ttl=ttl) as (a,),
        cluster(fake, store, ["b"], shard_count=2, ttl=ttl) as (b,),
    ):
        await a.claimer.start()
        assert fake.connected_shards() == [(0, 2), (1, 2)]

        await relay.cut()  # a can no longer renew; its connections to Discord are fine
        claims = [await store.lease_get(f"discord-shard:{i}/2") for i in (0, 1)]
        expiry = min(c.expires_at for c in claims if c is not None)
        while fake.connected_shards():
            assert utcnow() < expiry + timedelta(seconds=2), "a kept serving shards it may have lost"
            await asyncio.sleep(0.02)
        gone = utcnow()
        assert a.claimer.held == set()
        for _ in range(100):  # b, on the database, takes over once they expired
            if await b.claimer.claim_round():
                break
            await asyncio.sleep(0.1)
        taken = utcnow()

    assert gone < expiry <= taken, "a disconnected before any other node could claim its shards"


async def test_claims_stay_renewed_while_a_slow_shard_connects(store: Store) -> None:
    # READY held back 2.5 s (discord.py waits guild_ready_timeout for guilds), longer than the claim's
    # 1.5 s life: the round renews it while it waits, so the claim never lapses to another node.
    async with FakeDiscord(rate_limit=LOGINS) as fake:
        adapter = make_adapter(fake, shard_ids="auto", identify_interval_seconds=0, guild_ready_timeout=2.5)
        claimer = ShardClaimer(store, adapter, shard_count=1, ttl_seconds=1.5, node="slow")
        await adapter.start(Inbox())
        try:
            started = utcnow()
            held = await claimer.claim_round()
            took = (utcnow() - started).total_seconds()
            claim = await store.lease_get("discord-shard:0/1")
            live = fake.connected_shards()
        finally:
            await claimer.stop()
            await adapter.stop()
    assert took > 1.5 and held == {0} and live == [(0, 1)]
    assert claim is not None and (claim.owner, claim.generation) == ("slow", 1)
    assert claim.renewed_at > claim.acquired_at + timedelta(seconds=0.4)


async def test_a_start_prunes_presence_rows_of_nodes_dead_for_a_day(store: Store) -> None:
    # Every start leaves a discord-node: row; without pruning the table grows with each restart.
    now = utcnow()
    for name, at in (("gone", now - timedelta(days=2)), ("recent", now - timedelta(hours=1))):
        # Written as they were left (a lease is taken on the database's clock, which cannot go back).
        async with store.db.transaction() as s:
            await s.execute(
                insert(leases).values(
                    name=f"discord-node:{name}", owner=name, generation=1, acquired_at=at, renewed_at=at,
                    expires_at=at + timedelta(seconds=15),
                )
            )  # fmt: skip
    async with FakeDiscord(rate_limit=LOGINS) as fake, cluster(fake, store, ["a"], shard_count=1) as [node]:
        await node.claimer.start()
        names = [lease.name for lease in await store.lease_list("discord-node:")]
    assert "discord-node:gone" not in names
    assert {"discord-node:recent", "discord-node:a"} <= set(names)
