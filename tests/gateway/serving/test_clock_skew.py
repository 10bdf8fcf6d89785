"""Two gateways on one PostgreSQL database whose clocks are 10 s and 60 s apart (injected node
clocks): the node ahead takes no chat while its lease is live, and no turn runs twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from agent.clock import Clock, utcnow
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.gateway.conftest import gateway_rig
from tests.store.engines import only

pytestmark = only("postgresql")
LEASE = 9.0  # the PostgreSQL default of cluster.session_lease_seconds


def skewed(seconds: float) -> Clock:
    return lambda: utcnow() + timedelta(seconds=seconds)


@pytest.fixture
async def other_db(db_url: str, database: Database) -> AsyncIterator[Database]:
    db = Database(db_url)
    await db.connect()
    yield db
    await db.dispose()


@pytest.mark.parametrize("apart", [10, 60])
async def test_a_node_whose_clock_runs_ahead_takes_no_live_chat_and_no_turn_runs_twice(
    database: Database, other_db: Database, apart: int
) -> None:
    behind, ahead = Store(database, clock=skewed(-apart / 2)), Store(other_db, clock=skewed(apart / 2))
    async with gateway_rig(behind, lease_seconds=LEASE) as a, gateway_rig(ahead, lease_seconds=LEASE) as b:
        a.fake.delay = 2.0  # the turn is mid-call while the other node looks for work
        await a.say("hello there")
        for _ in range(20):
            await b.gateway.poll_inbox()
            await asyncio.sleep(0.1)
        await a.settle(within=20)
        await b.settle(within=20)
    assert len(a.responder.chat_bodies) + len(b.responder.chat_bodies) == 1  # one turn
    assert a.adapter.texts + b.adapter.texts == ["reply: hello there"]  # one reply
