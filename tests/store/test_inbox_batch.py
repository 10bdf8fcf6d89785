"""Group commit of the inbox (gateway.store.group_commit.py): fewer transactions, nothing lost.

A caller of ``inbox_put`` may acknowledge the message to its platform as soon as the call
returns, so: it returns only once its row is committed; an error in one item fails that
item only; a writer cancelled mid-batch fails every caller of the batch and stores none of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from agent.errors import NotFound, StoreError
from gateway.store.db import Database
from gateway.store.models import inbox
from gateway.store.repository import Store


async def put(
    store: Store, pmid: str | None, *, chat: str = "1", key: Any = "tg:group:1"
) -> tuple[int, bool]:
    return await store.inbox_put(
        platform="telegram",
        chat_id=chat,
        platform_message_id=pmid,
        session_key=key,
        payload={"text": f"hello {pmid}"},
        addressed=False,
    )


async def count_rows(db: Database) -> int:
    async with db.transaction(write=False) as s:
        return int(await s.scalar(select(func.count()).select_from(inbox)) or 0)


@contextlib.asynccontextmanager
async def writes_stalled(db: Database) -> AsyncIterator[None]:
    """Hold the inbox writer up: on SQLite before its BEGIN (this process's write lock), on
    PostgreSQL inside its transaction (another connection locks the table against inserts)."""
    if db.dialect == "sqlite":
        async with db._write_lock.hold():
            yield
        return
    other = create_async_engine(db.url, poolclass=NullPool)
    try:
        async with other.begin() as conn:
            await conn.execute(text("LOCK TABLE inbox IN EXCLUSIVE MODE"))
            yield
    finally:
        await other.dispose()


def writer_task() -> asyncio.Task[Any]:
    (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "inbox group commit"]
    return task


async def test_concurrent_puts_share_transactions(store: Store, database: Database) -> None:
    commits = 0

    def on_commit(_conn: object) -> None:
        nonlocal commits
        commits += 1

    database.listen("commit", on_commit)
    try:
        results = await asyncio.gather(*(put(store, f"m{i}", chat=str(i % 5)) for i in range(60)))
    finally:
        database.unlisten("commit", on_commit)
    assert all(created for _, created in results) and len({i for i, _ in results}) == 60
    assert commits <= 3, f"60 concurrent puts took {commits} transactions"
    assert await count_rows(database) == 60


async def test_each_put_returns_only_once_its_row_is_committed(store: Store, database: Database) -> None:
    """Seen from another connection the moment the call returns (what the platform ack relies on)."""
    observer = Database(database.url)
    await observer.connect()
    try:

        async def put_and_look(i: int) -> bool:
            inbox_id, _ = await put(store, f"c{i}")
            async with observer.transaction(write=False) as s:
                return await s.scalar(select(inbox.c.id).where(inbox.c.id == inbox_id)) == inbox_id

        assert all(await asyncio.gather(*(put_and_look(i) for i in range(40))))
    finally:
        await observer.dispose()


async def test_one_bad_item_fails_alone(store: Store, database: Database) -> None:
    async def bad() -> tuple[int, bool]:
        return await put(store, "bad", key=None)  # session_key is NOT NULL: this row cannot be stored

    results = await asyncio.gather(
        *(put(store, f"ok{i}") for i in range(5)),
        bad(),
        *(put(store, f"ok{i}") for i in range(5, 10)),
        return_exceptions=True,
    )
    assert isinstance(results[5], Exception)
    good = [r for i, r in enumerate(results) if i != 5]
    assert all(isinstance(r, tuple) and r[1] for r in good)
    assert await count_rows(database) == 10


async def test_duplicates_within_one_batch_and_across_batches_are_stored_once(
    store: Store, database: Database
) -> None:
    first = await asyncio.gather(*(put(store, pmid) for pmid in ["a", "b", "a", None, "b", "a"]))
    assert [created for _, created in first] == [True, True, False, True, False, False]
    assert first[0][0] == first[2][0] == first[5][0] and first[1][0] == first[4][0]
    again = await asyncio.gather(put(store, "a"), put(store, "c"))
    assert again[0] == (first[0][0], False) and again[1][1]
    assert await count_rows(database) == 4


async def test_a_writer_cancelled_mid_batch_stores_nothing_and_acknowledges_nothing(
    store: Store, database: Database
) -> None:
    async with writes_stalled(database):
        callers = [asyncio.create_task(put(store, f"x{i}")) for i in range(8)]
        await asyncio.sleep(0.2)  # the writer has taken the batch and waits on the stalled write
        assert not any(c.done() for c in callers)
        writer_task().cancel()
        results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, StoreError) for r in results), results
    assert await count_rows(database) == 0
    # The queue works again afterwards, and the same messages (redelivered) are stored.
    redelivered = await asyncio.gather(*(put(store, f"x{i}") for i in range(8)))
    assert all(created for _, created in redelivered)
    assert await count_rows(database) == 8


async def test_a_caller_cancelled_before_its_item_is_taken_is_not_stored(
    store: Store, database: Database
) -> None:
    async with writes_stalled(database):
        first = asyncio.create_task(put(store, "first"))
        await asyncio.sleep(0.1)  # the writer holds "first" and waits
        second = asyncio.create_task(put(store, "second"))
        await asyncio.sleep(0.05)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
    assert (await first)[1]
    await asyncio.sleep(0.1)
    async with database.transaction(write=False) as s:
        stored = list(await s.scalars(select(inbox.c.platform_message_id)))
    assert stored == ["first"]


async def queue_reply(store: Store, i: int, answers: list[tuple[int, int | None]] | None = None) -> int:
    return await store.outbox_put(
        session_id=None,
        target={"platform": "telegram", "chat_id": str(i)},
        text=f"reply {i}",
        inbox_ids=[a for a, _ in answers or []],
        message_id=None,
        answers=answers or [],
    )


async def test_sent_replies_of_a_round_are_recorded_together_and_a_missing_one_fails_alone(
    store: Store, database: Database
) -> None:
    rows = [await queue_reply(store, i) for i in range(12)]
    commits = 0

    def on_commit(_conn: object) -> None:
        nonlocal commits
        commits += 1

    database.listen("commit", on_commit)
    try:
        results = await asyncio.gather(
            *(store.outbox_mark_sent(r, [f"p{r}"]) for r in rows),
            store.outbox_mark_sent(999_999, ["nowhere"]),
            return_exceptions=True,
        )
    finally:
        database.unlisten("commit", on_commit)
    assert results[:12] == [None] * 12 and isinstance(results[12], NotFound)
    assert commits <= 4, f"13 concurrent marks took {commits} transactions"
    for r in rows:
        row = await store.outbox_get(r)
        assert (row.status, row.delivered_ids, row.attempts) == ("sent", [f"p{r}"], 1)


async def test_a_reply_and_the_items_it_answers_commit_together(store: Store) -> None:
    items = [(await put(store, f"q{i}"))[0] for i in range(3)]
    outbox_id = await queue_reply(store, 1, [(items[0], None), (items[1], None)])
    assert [(await store.inbox_get(i)).status for i in items] == ["done", "done", "pending"]
    assert (await store.outbox_get(outbox_id)).inbox_ids == items[:2]
