"""A turn whose session lease ran out mid-call, and that no other worker took, is not left holding
the chat: its write is refused (the fence), its items are handed back, and the chat is answered once."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import text

from agent.clock import utcnow
from gateway.store.repository import Store
from tests.gateway.conftest import gateway_rig


async def test_a_turn_whose_lease_ran_out_unclaimed_is_served_again_and_answered_once(store: Store) -> None:
    async with gateway_rig(store, lease_seconds=60) as r:
        r.fake.delay = 1.0  # every model call
        await r.say("hello there")
        await asyncio.sleep(0.4)  # inside the model call
        # As if the worker had stalled past its lease (a long GC pause, SIGSTOP) and nobody took over.
        async with store.db.transaction() as s:
            await s.execute(
                text("UPDATE inbox SET lease_until = :past WHERE status = 'processing'"),
                {"past": utcnow() - timedelta(seconds=1)},
            )
        await r.adapter.wait_for(1, within=15)
        await r.settle(within=15)
        assert r.adapter.texts == ["reply: hello there"]
    async with store.db.transaction(write=False) as s:
        statuses = (await s.execute(text("SELECT status FROM inbox"))).scalars().all()
        assistant = await s.scalar(text("SELECT count(*) FROM messages WHERE role = 'assistant'"))
    assert (statuses, assistant) == (["done"], 1)
