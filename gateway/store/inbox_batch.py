"""Group commit for the inbox: many concurrent ``inbox_put`` calls, one transaction.

Every received message is committed before its platform is acknowledged; at hundreds of
messages a second a transaction per message is the ceiling (SQLite has one writer, and each
commit is a round trip through the driver's thread). So puts queue here and one writer task
stores whatever has queued meanwhile in a single transaction; each caller's future resolves
only after that transaction has committed. Nothing waits on purpose: a lone message is
written at once, and a batch is simply what arrived while the previous one was committing.

Guarantees (tests/store/test_inbox_batch.py):
- a caller returns only once its row is committed (durable as the database's settings make
  any commit: WAL with ``synchronous=NORMAL`` on SQLite, see README "Throughput");
- if the batch's transaction fails, each item is retried alone, so one bad item fails only
  its own caller;
- a writer cancelled mid-batch rolls back and fails every caller of that batch (none was
  acknowledged); a caller cancelled before its item was taken is not written at all;
- the same platform message twice in one batch is stored once (the second gets ``created``
  False), as across batches.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, tuple_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from agent.errors import StoreError
from gateway.store.base import CONFLICT_RETRIES
from gateway.store.db import Database
from gateway.store.models import inbox

_log = logging.getLogger(__name__)

MAX_BATCH = 500
"""Rows per transaction: a few thousand bound parameters, far below either database's limit."""

Key = tuple[str, str, str]


@dataclass(eq=False)
class InboxPut:
    """One queued row (column values) and the future its caller awaits: ``(id, created)``."""

    values: dict[str, Any]
    future: asyncio.Future[tuple[int, bool]] = field(repr=False)

    @property
    def key(self) -> Key | None:
        pmid = self.values["platform_message_id"]
        return None if pmid is None else (self.values["platform"], self.values["chat_id"], pmid)


class InboxBatch:
    """The queue and its writer; one per :class:`Database` (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._pending: list[InboxPut] = []
        self._writer: asyncio.Task[None] | None = None

    async def put(self, values: dict[str, Any]) -> tuple[int, bool]:
        item = InboxPut(values, asyncio.get_running_loop().create_future())
        self._pending.append(item)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="inbox group commit")
        # Cancelling this await cancels the future: not yet taken, the item is dropped; taken,
        # it may still be committed (unacknowledged, so the platform redelivers: stored once).
        return await item.future

    async def _write(self) -> None:
        while self._pending:
            batch = [i for i in self._pending[:MAX_BATCH] if not i.future.done()]
            del self._pending[:MAX_BATCH]
            if not batch:
                continue
            try:
                await self._commit_batch(batch)
            except asyncio.CancelledError:
                _fail([*batch, *self._pending], StoreError("the inbox writer was cancelled; not stored"))
                self._pending.clear()
                raise
            except Exception as exc:  # the batch rolled back: store each alone, isolating the bad one
                if len(batch) > 1:
                    _log.warning("inbox batch of %d failed (%s); storing one by one", len(batch), exc)
                for item in batch:
                    await self._commit_alone(item)

    async def _commit_batch(self, batch: list[InboxPut]) -> None:
        async with self._db.transaction() as s:
            results = await _store(s, batch)
        # Only now, after COMMIT returned, may any caller acknowledge its message.
        for item, result in zip(batch, results, strict=True):
            if not item.future.done():
                item.future.set_result(result)

    async def _commit_alone(self, item: InboxPut) -> None:
        last: Exception | None = None
        for _ in range(CONFLICT_RETRIES):
            try:
                async with self._db.transaction() as s:
                    (result,) = await _store(s, [item])
            except IntegrityError as exc:  # the same message stored at once elsewhere: look again
                last = exc
                continue
            except asyncio.CancelledError:
                _fail([item], StoreError("the inbox writer was cancelled; not stored"))
                raise
            except Exception as exc:
                _fail([item], exc)
                return
            if not item.future.done():
                item.future.set_result(result)
            return
        _fail([item], StoreError(f"could not store inbound message {item.key}: {last}"))


async def _store(s: AsyncSession, batch: list[InboxPut]) -> list[tuple[int, bool]]:
    """Insert the batch's new rows in one statement; ``(id, created)`` per item, in order."""
    keys = {k for k in (i.key for i in batch) if k is not None}
    known: dict[Key, int] = {}
    if keys:
        columns = tuple_(inbox.c.platform, inbox.c.chat_id, inbox.c.platform_message_id)
        stmt = select(inbox.c.id, *columns.clauses).where(columns.in_(list(keys)))
        for row in await s.execute(stmt):
            known[(row[1], row[2], row[3])] = int(row[0])
    fresh: list[InboxPut] = []
    first: dict[Key, InboxPut] = {}
    for item in batch:
        key = item.key
        if key is None or (key not in known and key not in first):
            fresh.append(item)
            if key is not None:
                first[key] = item
    ids: dict[int, int] = {}  # id(item) -> new row id
    if fresh:
        add = insert(inbox).returning(inbox.c.id, sort_by_parameter_order=True)
        rows = await s.execute(add, [i.values for i in fresh])
        ids = {id(item): int(row[0]) for item, row in zip(fresh, rows, strict=True)}
    results: list[tuple[int, bool]] = []
    for item in batch:
        key = item.key
        if id(item) in ids:
            results.append((ids[id(item)], True))
        elif key is not None and key in known:
            results.append((known[key], False))
        else:  # a repeat within this batch: the first occurrence's row
            assert key is not None
            results.append((ids[id(first[key])], False))
    return results


def _fail(items: list[InboxPut], exc: BaseException) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_exception(exc)
