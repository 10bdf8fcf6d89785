"""Group commit: many concurrent writes of one kind, one transaction (inbox rows, sent replies).

Every received message is committed before its platform is acknowledged; at hundreds of
messages a second a transaction per message is the ceiling (SQLite has one writer, and each
commit is a round trip through the driver's thread). So puts queue here and one writer task
stores whatever has queued meanwhile in a single transaction; each caller's future resolves
only after that transaction has committed. Nothing waits on purpose: a lone message is
written at once, and a batch is simply what arrived while the previous one was committing.

Used for the inbox (:class:`InboxBatch`) and for recording sent replies
(:class:`OutboxSentBatch`: the chats of a delivery round send concurrently).

Guarantees (tests/store/test_inbox_batch.py):
- a caller returns only once its row is committed (durable as the database's settings make
  any commit: WAL with ``synchronous=NORMAL`` on SQLite, see docs/measured.md, "Throughput");
- if the batch's transaction fails, each item is retried alone, so one bad item fails only
  its own caller;
- a writer cancelled mid-batch rolls back and fails every caller of that batch (none was
  acknowledged); a caller cancelled before its item was taken is not written at all;
- the same platform message twice in one batch is stored once (the second gets ``created``
  False), as across batches.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy import bindparam, insert, select, tuple_, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from agent.errors import NotFound, StoreError
from gateway.store.base import CONFLICT_RETRIES
from gateway.store.db import Database
from gateway.store.models import inbox, outbox
from gateway.store.wakeups import notify_inbox

_log = logging.getLogger(__name__)

MAX_BATCH = 500
"""Rows per transaction: a few thousand bound parameters, far below either database's limit."""

Key = tuple[str, str, str]
R = TypeVar("R")


@dataclass(eq=False)
class Queued(Generic[R]):
    """One queued write (its values) and the future its caller awaits."""

    values: dict[str, Any]
    future: asyncio.Future[R] = field(repr=False)

    @property
    def key(self) -> Key | None:
        pmid = self.values.get("platform_message_id")
        return None if pmid is None else (self.values["platform"], self.values["chat_id"], pmid)


class GroupCommit(ABC, Generic[R]):
    """A queue of writes and the task that commits them in batches (see the module docstring)."""

    name = "group commit"
    urgent = False
    """Ahead of other writers for SQLite's write lock (a platform waits on these commits)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._pending: list[Queued[R]] = []
        self._writer: asyncio.Task[None] | None = None

    @abstractmethod
    def _store(self, conn: Connection, batch: list[Queued[R]]) -> list[R | Exception]:
        """Write the batch inside ``conn``'s transaction (synchronously, maybe in a worker
        thread: touch no future here); one result, or the error of that item alone, per item."""

    async def put(self, values: dict[str, Any]) -> R:
        item: Queued[R] = Queued(values, asyncio.get_running_loop().create_future())
        self._pending.append(item)
        if self._writer is None or self._writer.done():
            # A fresh context: the writer serves every caller, never one turn's fence (gateway.store.fence).
            self._writer = asyncio.create_task(self._write(), name=self.name, context=contextvars.Context())
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
                _fail([*batch, *self._pending], StoreError(f"the {self.name} was cancelled; not stored"))
                self._pending.clear()
                raise
            except Exception as exc:  # the batch rolled back: store each alone, isolating the bad one
                if len(batch) > 1:
                    _log.warning("%s: a batch of %d failed (%s); one by one", self.name, len(batch), exc)
                for item in batch:
                    await self._commit_alone(item)

    async def _commit_batch(self, batch: list[Queued[R]]) -> None:
        results = await self._db.write_at_once(lambda conn: self._store(conn, batch), urgent=self.urgent)
        # Only now, after COMMIT returned, may any caller acknowledge its message.
        for item, result in zip(batch, results, strict=True):
            _settle(item, result)

    async def _commit_alone(self, item: Queued[R]) -> None:
        last: Exception | None = None
        for _ in range(CONFLICT_RETRIES):
            try:
                (result,) = await self._db.write_at_once(
                    lambda conn: self._store(conn, [item]), urgent=self.urgent
                )
            except IntegrityError as exc:  # the same message stored at once elsewhere: look again
                last = exc
                continue
            except asyncio.CancelledError:
                _fail([item], StoreError(f"the {self.name} was cancelled; not stored"))
                raise
            except Exception as exc:
                _fail([item], exc)
                return
            _settle(item, result)
            return
        _fail([item], StoreError(f"could not write {item.key or item.values}: {last}"))


class InboxBatch(GroupCommit[tuple[int, bool]]):
    """Inbox rows; each caller gets ``(id, created)``."""

    name = "inbox group commit"
    urgent = True

    def _store(
        self, conn: Connection, batch: list[Queued[tuple[int, bool]]]
    ) -> list[tuple[int, bool] | Exception]:
        return list(_store_inbox(conn, batch))


def _store_inbox(conn: Connection, batch: list[Queued[tuple[int, bool]]]) -> list[tuple[int, bool]]:
    """Insert the batch's new rows in one statement; ``(id, created)`` per item, in order."""
    keys = {k for k in (i.key for i in batch) if k is not None}
    known: dict[Key, int] = {}
    if keys:
        columns = tuple_(inbox.c.platform, inbox.c.chat_id, inbox.c.platform_message_id)
        stmt = select(inbox.c.id, *columns.clauses).where(columns.in_(list(keys)))
        for row in conn.execute(stmt):
            known[(row[1], row[2], row[3])] = int(row[0])
    fresh: list[Queued[tuple[int, bool]]] = []
    first: dict[Key, Queued[tuple[int, bool]]] = {}
    for item in batch:
        key = item.key
        if key is None or (key not in known and key not in first):
            fresh.append(item)
            if key is not None:
                first[key] = item
    ids: dict[int, int] = {}  # id(item) -> new row id
    if fresh:
        add = insert(inbox).returning(inbox.c.id, sort_by_parameter_order=True)
        rows = conn.execute(add, [i.values for i in fresh])
        ids = {id(item): int(row[0]) for item, row in zip(fresh, rows, strict=True)}
        notify_inbox(conn, (str(i.values["session_key"]) for i in fresh))
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


def _fail(items: list[Queued[Any]], exc: BaseException) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_exception(exc)


class OutboxSentBatch(GroupCommit[None]):
    """Outbox rows just sent: ``{"row_id", "at", "ids"}`` each; a missing row fails its caller."""

    name = "outbox sent group commit"

    def _store(self, conn: Connection, batch: list[Queued[None]]) -> list[Exception | None]:
        stmt = (
            update(outbox)
            .where(outbox.c.id == bindparam("row_id"))
            .values(
                attempts=outbox.c.attempts + 1,
                status="sent",
                sent_at=bindparam("at", type_=outbox.c.sent_at.type),
                delivered_ids=bindparam("ids", type_=outbox.c.delivered_ids.type),
                error=None,
            )
        )
        wanted = [int(item.values["row_id"]) for item in batch]
        found = set(conn.scalars(select(outbox.c.id).where(outbox.c.id.in_(wanted))))
        present = [item.values for item, row_id in zip(batch, wanted, strict=True) if row_id in found]
        if present:
            conn.execute(stmt, present)
        # A missing row fails only its caller; nothing of it is written.
        return [None if row_id in found else NotFound(f"no outbox item {row_id}") for row_id in wanted]


def _settle(item: Queued[R], result: R | Exception) -> None:
    if item.future.done():
        return
    if isinstance(result, Exception):
        item.future.set_exception(result)
    else:
        item.future.set_result(result)
