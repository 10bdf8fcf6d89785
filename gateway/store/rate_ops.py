"""Rate limits shared by every worker on the database: one row per scope, the time its next send may go.

A scope is a name (``telegram:global``, ``telegram:chat:42``) and the interval its sends keep.
:meth:`RateOps.rate_reserve` takes the next slot in all of a send's scopes at once, in one short
transaction, and says how long the caller must wait before sending: the slot is the latest of
now and each scope's ``next_at``, and every scope's ``next_at`` moves to that slot plus its
interval. Reserving rather than asking "may I?" means a waiting sender never polls, and senders
are served in the order they asked. :meth:`RateOps.rate_pause` pushes scopes' ``next_at`` out
(a 429's ``retry_after`` seen by one worker pauses every worker's sends to that scope).

Serialized per platform (an advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite): every
send of a platform touches its global scope anyway, so one lock costs no concurrency, and rows
of new scopes can be inserted without lock-order deadlocks. Times are the database's clock on
PostgreSQL (workers on several machines agree on it to the microsecond), this machine's on
SQLite (one process).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from gateway.store.base import Repo
from gateway.store.columns import rows_changed
from gateway.store.models import rate_scopes

MAX_SCOPE = 160


class RateOps(Repo):
    """Reserve send slots and record pauses in shared rate-limit scopes."""

    def _rate_turn(self, platform: str) -> asyncio.Lock:
        """One reservation of a platform in flight per process. They queue on the database's lock
        anyway; queued here instead, a burst of sends holds one pooled connection rather than the
        whole pool, and the lease renewals and fenced writes of the turns never wait behind it."""
        locks: dict[str, asyncio.Lock] = self.__dict__.setdefault("_rate_locks", {})
        return locks.setdefault(platform, asyncio.Lock())

    async def rate_reserve(self, platform: str, scopes: Sequence[tuple[str, float]]) -> float:
        """Take the next slot in every ``(scope, interval seconds)``; seconds to wait before sending."""
        if not scopes:
            return 0.0
        async with self._rate_turn(platform), self._tx() as s:
            now = await self._serialize(s, platform)
            names = [name for name, _ in scopes]
            found = await s.execute(select(rate_scopes.c.next_at).where(rate_scopes.c.scope.in_(names)))
            slot = max([now, *(float(next_at) for (next_at,) in found)])
            await self._upsert(s, [(name, slot + interval) for name, interval in scopes], keep_later=False)
            return slot - now

    async def rate_pause(self, platform: str, names: Sequence[str], seconds: float) -> None:
        """No send in ``names`` before ``seconds`` from now (never brings a later ``next_at`` back)."""
        if not names or seconds <= 0:
            return
        async with self._rate_turn(platform), self._tx() as s:
            now = await self._serialize(s, platform)
            await self._upsert(s, [(name, now + seconds) for name in names], keep_later=True)

    async def rate_next_at(self, scope: str) -> float | None:
        """A scope's ``next_at`` relative to now (negative: free since then); None if never used."""
        async with self._tx(write=False) as s:
            now = await self._now(s)
            found = await s.scalar(select(rate_scopes.c.next_at).where(rate_scopes.c.scope == scope))
            return None if found is None else float(found) - now

    async def rate_prune(self, *, idle_seconds: float = 3600.0) -> int:
        """Forget scopes free for ``idle_seconds`` (one row per chat ever sent to would otherwise
        grow without end); a scope with no row is free now, so nothing is paced differently."""
        async with self._tx() as s:
            now = await self._now(s)
            gone = await s.execute(delete(rate_scopes).where(rate_scopes.c.next_at < now - idle_seconds))
            return rows_changed(gone)

    async def _serialize(self, s: AsyncSession, platform: str) -> float:
        if self.db.dialect == "postgresql":
            await s.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(f"rate:{platform}", 0))))
        return await self._now(s)

    async def _now(self, s: AsyncSession) -> float:
        if self.db.dialect == "postgresql":
            # clock_timestamp(), not now(): the lock may have been waited for inside this transaction.
            found = await s.scalar(select(func.extract("epoch", func.clock_timestamp())))
            assert found is not None
            return float(found)
        return time.time()

    async def _upsert(self, s: AsyncSession, values: list[tuple[str, float]], *, keep_later: bool) -> None:
        for name, _ in values:
            if len(name) > MAX_SCOPE:
                raise ValueError(f"rate scope longer than {MAX_SCOPE} characters: {name[:40]!r}...")
        dialect_insert = sqlite.insert if self.db.dialect == "sqlite" else postgresql.insert
        stmt = dialect_insert(rate_scopes).values([{"scope": n, "next_at": at} for n, at in values])
        new: ColumnElement[Any] = stmt.excluded.next_at
        if keep_later:
            larger = func.max if self.db.dialect == "sqlite" else func.greatest
            new = larger(rate_scopes.c.next_at, new)
        await s.execute(stmt.on_conflict_do_update(index_elements=["scope"], set_={"next_at": new}))
