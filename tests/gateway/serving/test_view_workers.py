"""Two gateways on one database, each with its own store and in-memory active views: what one
worker changes in a session, the other's next turn sees (the cache is correct with
several workers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from agent.types import text_block
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.gateway.conftest import gateway_rig, user_texts
from tests.store.helpers import summary_plan

KEY = "test:dm:chat-1"


@pytest.fixture
async def other_store(database: Database) -> AsyncIterator[Store]:
    db = Database(database.url)
    await db.connect()
    try:
        yield Store(db)
    finally:
        await db.dispose()


async def test_a_change_by_another_worker_reaches_this_workers_next_turn(
    store: Store, other_store: Store
) -> None:
    async with gateway_rig(store) as a, gateway_rig(other_store, start=False) as b:
        await a.say("the first question", message_id="q1")
        await a.settle()
        await a.say("the second question", message_id="q2")
        await a.settle()
        sid = await a.session_id()
        assert len(await store.load_active(sid)) == 4  # and A holds the view in memory

        # Worker B (its own engine and cache) edits the first message and compacts the next two.
        await b.store.record_edit(
            sid,
            "q1",
            [text_block("the first question, edited")],
            at=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
        )
        view = await b.store.load_active(sid)
        await b.store.archive_and_summarize(sid, summary_plan(view[1:3], "what B summarized"))

        await a.say("the third question", message_id="q3")
        await a.settle()
        sent = user_texts(a.responder.chat_bodies[-1])
        joined = "\n".join(sent)
        assert "the first question, edited" in joined
        assert "what B summarized" in joined
        assert "the second question" not in joined
