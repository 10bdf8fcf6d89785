"""Plumbing shared by the parts of :class:`gateway.store.repository.Store`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy import ColumnElement, Connection, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from agent.clock import Clock, utcnow
from gateway.store.db import Database
from gateway.store.models import sessions
from gateway.store.view_cache import ActiveViews

T = TypeVar("T")
CONFLICT_RETRIES = 8
"""How often a write that lost a race (unique conflict, stale version) is tried again."""
CHUNK = 500
"""Ids per ``IN (...)`` list: far below SQLite's and PostgreSQL's parameter limits."""


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def unique(items: Iterable[T]) -> list[T]:
    """``items`` without repeats, first occurrence kept."""
    return list(dict.fromkeys(items))


DB_NOW = select(func.clock_timestamp())
"""The database server's clock (PostgreSQL): the one time every node of a cluster agrees on."""


def aware(at: datetime | None) -> datetime:
    """A time read from the database, as aware UTC."""
    if at is None:
        raise ValueError("the database returned no time")
    return at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)


class Repo:
    """One part of the store; all parts share the same :class:`Database`.

    ``clock`` is this process's clock. Leases, claims and fences are judged by the database's
    clock on PostgreSQL (several nodes, whose clocks may disagree), by ``clock`` on SQLite (one
    process, whose clock is the database's)."""

    def __init__(self, db: Database, views: ActiveViews | None = None, *, clock: Clock = utcnow) -> None:
        self._db = db
        # The active views this store has read or written (``gateway.store.view_cache``).
        self._views = views if views is not None else ActiveViews()
        self._clock = clock

    @property
    def clock(self) -> Clock:
        """This process's clock (timestamps it records; leases on SQLite)."""
        return self._clock

    async def lease_now(self, s: AsyncSession, now: datetime | None = None) -> datetime:
        """The time leases are judged by, read in the transaction ``s`` (see the class docstring):
        the database's on PostgreSQL; else ``now`` (the caller's clock) or this store's clock."""
        if self._db.dialect == "postgresql":
            return aware(await s.scalar(DB_NOW))
        return now or self._clock()

    def lease_now_in(self, conn: Connection, now: datetime | None = None) -> datetime:
        """:meth:`lease_now` on a synchronous connection."""
        if self._db.dialect == "postgresql":
            return aware(conn.scalar(DB_NOW))
        return now or self._clock()

    async def as_lease_time(self, s: AsyncSession, at: datetime) -> datetime:
        """``at``, a time of this process's clock (a retry due in N seconds), on the lease clock."""
        if self._db.dialect != "postgresql":
            return at
        return at + (await self.lease_now(s) - self._clock())

    def lease_clock(self) -> ColumnElement[datetime] | datetime:
        """:meth:`lease_now` as a value for one statement: the SQL clock on PostgreSQL."""
        if self._db.dialect == "postgresql":
            return func.clock_timestamp()
        return self._clock()

    async def db_now(self) -> datetime:
        """The database's time now (PostgreSQL), else this process's clock."""
        async with self._tx(write=False) as s:
            return await self.lease_now(s)

    @property
    def db(self) -> Database:
        return self._db

    def _tx(self, *, write: bool = True) -> AbstractAsyncContextManager[AsyncSession]:
        return self._db.transaction(write=write)

    async def _session_exists(self, session_id: str) -> bool:
        async with self._tx(write=False) as s:
            found = await s.scalar(select(exists().where(sessions.c.id == session_id)))
            return bool(found)


async def bump_view(s: AsyncSession, *session_ids: str) -> None:
    """The active set of these sessions changes in this transaction: move their ``view_version``
    on, so that no worker's cached view of them is used again (``gateway.store.view_cache``)."""
    for part in chunks(sorted(set(session_ids))):
        await s.execute(
            update(sessions).where(sessions.c.id.in_(part)).values(view_version=sessions.c.view_version + 1)
        )
