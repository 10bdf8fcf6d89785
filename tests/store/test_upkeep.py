"""Upkeep on every engine: finished queue rows are pruned (the messages stay), the engine is tidied."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select, text, update

from agent.types import ChatMessage, SearchFilters
from gateway.config import UpkeepSettings
from gateway.jobs.upkeep import Upkeep
from gateway.store.models import inbox, messages, outbox
from gateway.store.repository import Store
from gateway.store.task_ops import NewTask
from tests.store.helpers import new_session

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=40)


async def count(store: Store, table: object, *where: object) -> int:
    async with store.db.engine.connect() as conn:
        stmt = select(func.count()).select_from(table)  # type: ignore[arg-type]
        for condition in where:
            stmt = stmt.where(condition)  # type: ignore[arg-type]
        return int(await conn.scalar(stmt) or 0)


async def queue_row(store: Store, session_id: str, n: int, *, status: str, at: datetime) -> int:
    """An inbox item answered by an outbox row, both finished (or not) at ``at``."""
    inbox_id, _ = await store.inbox_put(
        platform="telegram",
        chat_id="1",
        platform_message_id=f"m{n}",
        session_key="telegram:1",
        payload={"text": f"message {n}"},
        addressed=True,
    )
    message = await store.append_message(
        session_id, ChatMessage.user(f"message {n}", platform_message_id=f"m{n}")
    )
    outbox_id = await store.outbox_put(
        session_id=session_id,
        target={"platform": "telegram", "chat_id": "1"},
        text="ok",
        inbox_ids=[inbox_id],
        message_id=None,
    )
    if status == "done":
        await store.inbox_mark([inbox_id], "done", message_id=message.id)
        await store.outbox_mark_sent(outbox_id, ["1"])
    async with store.db.transaction() as s:
        await s.execute(update(inbox).where(inbox.c.id == inbox_id).values(received_at=at, processed_at=at))
        await s.execute(update(outbox).where(outbox.c.id == outbox_id).values(created_at=at, sent_at=at))
    return inbox_id


async def test_upkeep_prunes_old_finished_queue_rows_and_keeps_the_messages(store: Store) -> None:
    sid = await new_session(store)
    await queue_row(store, sid, 1, status="done", at=OLD)
    await queue_row(store, sid, 2, status="done", at=OLD)
    await queue_row(store, sid, 3, status="done", at=NOW - timedelta(days=1))  # recent: kept
    await queue_row(store, sid, 4, status="pending", at=OLD)  # never done: kept
    before = (await count(store, inbox), await count(store, outbox), await count(store, messages))

    report = await Upkeep(UpkeepSettings(prune_after_days=30), store).run(NOW)

    after = (await count(store, inbox), await count(store, outbox), await count(store, messages))
    assert before == (4, 4, 4)
    assert after == (2, 2, 4)
    assert (report["inbox_pruned"], report["outbox_pruned"], report["tasks_pruned"]) == (2, 2, 0)
    assert await store.outbox_for_inbox(4) is not None  # the unfinished item keeps its reply
    hits = await store.search("message", SearchFilters(session_id=sid))
    assert len(hits) == 4


async def test_upkeep_optimizes_the_engine_and_says_what_it_did(store: Store) -> None:
    sid = await new_session(store)
    for i in range(200):
        await store.append_message(sid, ChatMessage.user(f"filler message number {i} " + "x" * 200))

    report = await store.optimize_engine()

    if store.db.dialect == "sqlite":
        assert report["planner_optimized"] == 1 and report["fts_indexes_optimized"] >= 1
        assert report["wal_bytes_before"] > 0 and report["wal_bytes_after"] == 0
        assert report["checkpoint_blocked"] == 0
        database = store.db.url.database
        wal = await asyncio.to_thread(lambda: Path(f"{database}-wal").stat().st_size)
        assert wal == 0
    else:
        assert report["tables_analyzed"] == 7
        async with store.db.engine.connect() as conn:
            analyzed = await conn.scalar(
                text(
                    "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables "
                    "WHERE relname = 'messages' AND schemaname = current_schema()"
                )
            )
        assert analyzed
    hits = await store.search("filler", SearchFilters(session_id=sid), limit=5)
    assert len(hits) == 5  # the index still answers after its optimize


async def test_upkeep_prunes_tasks_that_finished_long_ago_and_keeps_active_ones(store: Store) -> None:
    def task(prompt: str) -> NewTask:
        return NewTask("telegram:1", "telegram", "1", None, None, prompt, "every", "3600", "UTC", NOW)

    finished = await store.task_create(task("old"), now=OLD, max_active=10)
    active = await store.task_create(task("active"), now=OLD, max_active=10)
    assert finished is not None and active is not None
    await store.task_cancel("telegram:1", finished.id, now=OLD)

    report = await store.prune_finished(before=NOW - timedelta(days=30))

    assert report["tasks_pruned"] == 1
    assert [t.prompt for t in await store.task_list(status=None)] == ["active"]
