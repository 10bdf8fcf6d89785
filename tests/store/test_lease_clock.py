"""Leases are judged by the database's clock on PostgreSQL, so nodes whose clocks disagree (by 10 s,
by 60 s) still agree on who holds what: no chat is taken while its lease is live, and no node loses
its own at once. Each node is a :class:`Store` with its own (skewed) clock on one database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from agent.clock import Clock, utcnow
from gateway.store import fence
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.store.engines import only

pytestmark = only("postgresql")
KEY = "telegram:1"
LEASE = 9.0  # the PostgreSQL default of cluster.session_lease_seconds
SKEWS = [10, 60]


def skewed(seconds: float) -> Clock:
    return lambda: utcnow() + timedelta(seconds=seconds)


class Nodes:
    """Stores with their own engine and clock on the test's database (one per node)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opened: list[Database] = []

    async def __call__(self, *offsets: float) -> list[Store]:
        stores = []
        for offset in offsets:
            db = Database(self.url)
            await db.connect()
            self.opened.append(db)
            stores.append(Store(db, clock=skewed(offset)))
        return stores


@pytest.fixture
async def nodes(db_url: str, database: Database) -> AsyncIterator[Nodes]:
    made = Nodes(db_url)
    yield made
    for db in made.opened:
        await db.dispose()


async def put(store: Store, pmid: str = "m1") -> int:
    item, _ = await store.inbox_put(
        platform="telegram",
        chat_id="1",
        platform_message_id=pmid,
        session_key=KEY,
        payload={"text": pmid},
        addressed=True,
    )
    return item


@pytest.mark.parametrize("skew", SKEWS)
async def test_a_node_whose_clock_runs_ahead_does_not_take_a_live_chat(nodes: Nodes, skew: int) -> None:
    a, b = await nodes(0, skew)
    await put(a)
    held = await a.claim_turn(worker="a", lease_seconds=LEASE, session_key=KEY)
    taken = await b.claim_turn(worker="b", lease_seconds=LEASE, session_key=KEY)
    assert (len(held.items), taken.items) == (1, [])


@pytest.mark.parametrize("skew", SKEWS)
async def test_a_node_whose_clock_runs_behind_keeps_its_chat(nodes: Nodes, skew: int) -> None:
    a, b = await nodes(-skew, 0)
    await put(a)
    held = await a.claim_turn(worker="a", lease_seconds=LEASE, session_key=KEY)
    taken = await b.claim_turn(worker="b", lease_seconds=LEASE, session_key=KEY)
    assert (len(held.items), taken.items) == (1, [])
    assert await a.inbox_renew(worker="a", lease_seconds=LEASE) == 1


@pytest.mark.parametrize("skew", SKEWS)
async def test_the_fence_lets_a_lagging_node_write_while_its_lease_is_live(nodes: Nodes, skew: int) -> None:
    (a, _) = await nodes(-skew, 0)
    await put(a)
    await a.claim_turn(worker="a", lease_seconds=LEASE, session_key=KEY)
    with fence.holding("a", KEY):
        await a.audit(
            "probe", platform="telegram", user_id="1", detail="a fenced write"
        )  # LeaseLost if the fence judged it expired


@pytest.mark.parametrize("skew", SKEWS)
async def test_named_leases_hold_across_clocks_ahead_and_behind(nodes: Nodes, skew: int) -> None:
    behind, ahead = await nodes(-skew, skew)
    mine = await behind.lease_acquire("intake:telegram", "behind", ttl_seconds=LEASE)
    theirs = await ahead.lease_acquire("intake:telegram", "ahead", ttl_seconds=LEASE)
    renewed = await behind.lease_renew("intake:telegram", "behind", ttl_seconds=LEASE)
    assert mine is not None and theirs is None and renewed is not None
    assert renewed.live(await ahead.db_now())


@pytest.mark.parametrize("skew", SKEWS)
async def test_a_reply_queued_by_a_node_ahead_is_due_at_once_for_the_others(nodes: Nodes, skew: int) -> None:
    a, b = await nodes(skew, 0)
    await a.outbox_put(session_id=None, target={"platform": "telegram", "chat_id": "1"}, text="hi",
                       inbox_ids=[], message_id=None)  # fmt: skip
    due = await b.outbox_claim(now=b.clock(), lease_seconds=LEASE, platforms=["telegram"], owner="b")
    assert [row.text for row in due] == ["hi"]


async def test_the_database_clock_is_read_whatever_the_node_clock(nodes: Nodes) -> None:
    a, _ = await nodes(3600, 0)
    at: datetime = await a.db_now()
    assert abs((at - utcnow()).total_seconds()) < 5
