"""Reads and guards for jobs that act on quiet sessions (the overnight sweep, scheduled resets).

A session is quiet when it is current, nothing was appended to it for a while, and its chat
has no open inbox item (pending, or being served by some worker). :meth:`IdleOps.session_guard`
keeps it quiet while a job works on it: on PostgreSQL it holds, for the guard's duration, the
same per-key advisory lock the inbox claim takes (``InboxOps.inbox_claim``), so no worker can
start serving that chat meanwhile; its claim waits and then sees the job's result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

from sqlalchemy import exists, func, select

from gateway.store.base import Repo
from gateway.store.convert import to_session
from gateway.store.models import SessionRow, inbox
from gateway.store.records import SessionInfo

OPEN_STATUSES = ("pending", "processing")


class IdleOps(Repo):
    async def idle_sessions(
        self, *, idle_before: datetime, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[SessionInfo]:
        """Current sessions last active at or before ``idle_before`` whose chat has no open inbox
        item, least recently active first. ``after`` continues from the last one of a page."""
        open_item = exists().where(inbox.c.session_key == SessionRow.key, inbox.c.status.in_(OPEN_STATUSES))
        stmt = select(SessionRow).where(
            SessionRow.ended_at.is_(None), SessionRow.last_activity_at <= idle_before, ~open_item
        )
        if after is not None:
            at, session_id = after
            stmt = stmt.where(
                (SessionRow.last_activity_at > at)
                | ((SessionRow.last_activity_at == at) & (SessionRow.id > session_id))
            )
        stmt = stmt.order_by(SessionRow.last_activity_at, SessionRow.id).limit(limit)
        async with self._tx(write=False) as s:
            return [to_session(row) for row in await s.scalars(stmt)]

    async def inbox_open(self, session_key: str) -> bool:
        """Whether the chat has an inbox item waiting or being served (a turn may be running)."""
        stmt = select(exists().where(inbox.c.session_key == session_key, inbox.c.status.in_(OPEN_STATUSES)))
        async with self._tx(write=False) as s:
            return bool(await s.scalar(stmt))

    @asynccontextmanager
    async def session_guard(self, session_key: str) -> AsyncIterator[None]:
        """While held, no worker claims the chat's inbox items (PostgreSQL; a no-op on SQLite,
        which serves one process: there the gateway's own per-session lock is the guard)."""
        if self.db.dialect != "postgresql":
            yield
            return
        async with self._tx() as s:
            await s.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(session_key, 0))))
            yield
