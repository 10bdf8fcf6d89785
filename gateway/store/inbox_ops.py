"""The durable inbox: intake (idempotent on the platform message id), claims with a lease, and
the end of each item (done, retried, dead-lettered)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Update,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import BindParameter

from agent.clock import utcnow
from agent.errors import NotFound
from gateway.store.base import DB_NOW, Repo, aware, chunks
from gateway.store.columns import clean_json, clean_text, rows_changed
from gateway.store.convert import to_inbox
from gateway.store.group_commit import InboxBatch
from gateway.store.models import inbox
from gateway.store.records import InboxRecord
from gateway.store.wakeups import COMMAND_CHANNEL, command_payload
from gateway.wire import InboxPayload

MAX_DEAD_LETTERS_PER_CHAT = 1000
"""Dead letters (failed inbox items) a chat keeps, newest first (docs/security.md)."""


def _claimable(now: datetime | BindParameter[Any] | ColumnElement[datetime]) -> ColumnElement[bool]:
    """Pending (and not waiting out a retry delay), or taken by a worker whose lease ran out.

    On a pending item ``lease_until`` is the time before which it is not tried again (set
    when serving it failed); a new item has none.
    """
    return or_(
        and_(inbox.c.status == "pending", or_(inbox.c.lease_until.is_(None), inbox.c.lease_until <= now)),
        and_(inbox.c.status == "processing", inbox.c.lease_until < now),
    )


def _held_elsewhere(
    session_key: str | BindParameter[Any],
    worker: str | BindParameter[Any],
    now: datetime | BindParameter[Any],
) -> ColumnElement[bool]:
    """Another worker holds a live lease on an item of the session: it is serving it."""
    other = inbox.alias("other")
    return exists().where(
        other.c.session_key == session_key,
        other.c.status == "processing",
        other.c.lease_until >= now,
        other.c.lease_owner != worker,
    )


@functools.cache
def _claim_statement(by_key: bool) -> Update:
    """The claim as one ``UPDATE ... RETURNING``, built once: on the hot path building and keying
    the statement cost more than SQLite running it (binds ``now``, ``until``, ``worker``,
    ``limit`` and, ``by_key``, ``key``)."""
    now = bindparam("now", type_=inbox.c.lease_until.type)
    chosen = select(inbox.c.id).where(_claimable(now))
    if by_key:
        chosen = chosen.where(inbox.c.session_key == bindparam("key"))
    chosen = chosen.order_by(inbox.c.received_at, inbox.c.id).limit(bindparam("limit", type_=Integer))
    # One UPDATE ... RETURNING takes them (and checks the session's lease in the same breath).
    claim = update(inbox).where(inbox.c.id.in_(chosen.with_for_update(skip_locked=True).scalar_subquery()))
    if by_key:
        claim = claim.where(~_held_elsewhere(bindparam("key"), bindparam("worker"), now))
    return claim.values(
        status="processing",
        lease_owner=bindparam("worker"),
        lease_until=bindparam("until", type_=inbox.c.lease_until.type),
        attempts=inbox.c.attempts + 1,
    ).returning(*inbox.c)


def claim_in(
    conn: Connection,
    dialect: str,
    *,
    worker: str,
    lease_seconds: float,
    session_key: str | None,
    limit: int,
    now: datetime,
) -> list[InboxRecord]:
    """:meth:`InboxOps.inbox_claim` inside the transaction of ``conn``; ``now`` is this process's
    clock, which judges the leases on SQLite only: PostgreSQL judges them by its own."""
    if dialect == "postgresql":
        if session_key is not None:
            # Claims for one key one at a time, so two cannot both see it free; the time is read
            # once the lock is held (a wait for it must not age it).
            lock = func.pg_advisory_xact_lock(func.hashtextextended(session_key, 0))
            now = aware(conn.execute(select(lock, func.clock_timestamp())).one()[1])
        else:
            now = aware(conn.scalar(DB_NOW))
    params = {"now": now, "until": now + timedelta(seconds=lease_seconds), "worker": worker, "limit": limit}
    if session_key is not None:
        params["key"] = session_key
    rows = [to_inbox(r) for r in conn.execute(_claim_statement(session_key is not None), params).mappings()]
    return sorted(rows, key=lambda r: (r.received_at, r.id))


class InboxOps(Repo):
    async def inbox_put(
        self,
        *,
        platform: str,
        chat_id: str,
        platform_message_id: str | None,
        session_key: str,
        payload: InboxPayload,
        addressed: bool,
        not_before: datetime | None = None,
    ) -> tuple[int, bool]:
        """Persist a received message; ``(id, created)``. The same platform message is stored once.
        ``not_before``: not claimable until then (a webhook waiting out its coalescing window).

        Returns once the row is committed. Concurrent calls share one transaction (group
        commit, :mod:`gateway.store.group_commit`).
        """
        values = {
            "platform": platform,
            "chat_id": chat_id,
            "platform_message_id": platform_message_id,
            "session_key": session_key,
            "payload": clean_json(payload),
            "addressed": addressed,
            "status": "pending",
            "attempts": 0,
            "received_at": utcnow(),
            "lease_until": not_before,
        }
        batch: InboxBatch | None = getattr(self, "_inbox_batch", None)
        if batch is None:
            batch = self._inbox_batch = InboxBatch(self._db)
        return await batch.put(values)

    async def notify_command(self, session_key: str, action: str) -> None:
        """Tell every worker to act on ``session_key`` now (``stop``: cancel its running turn),
        wherever the turn runs; PostgreSQL only (one SQLite process acts on its own)."""
        if self.db.dialect != "postgresql":
            return
        async with self._tx() as s:
            await s.execute(select(func.pg_notify(COMMAND_CHANNEL, command_payload(session_key, action))))

    async def inbox_claim(
        self, *, worker: str, lease_seconds: float, session_key: str | None = None, limit: int = 50
    ) -> list[InboxRecord]:
        """Take up to ``limit`` claimable items, oldest first, leased to ``worker``.

        With ``session_key``, the claim is also the session's lease: nothing is claimed while
        another worker holds a live lease on an item of the same session, so one session is
        served by one worker at a time. Claims for one key are serialized (a transaction-scoped
        advisory lock on PostgreSQL; SQLite's BEGIN IMMEDIATE already serializes writers), and
        PostgreSQL skips rows another worker is claiming right now (FOR UPDATE SKIP LOCKED).
        """
        return await self.db.write_at_once(
            lambda conn: claim_in(
                conn,
                self.db.dialect,
                worker=worker,
                lease_seconds=lease_seconds,
                session_key=session_key,
                limit=limit,
                now=self._clock(),
            )
        )

    async def inbox_done(self, done: Sequence[tuple[int, int | None]]) -> None:
        """Finish served items, each with the message it became, in one transaction."""
        now = utcnow()
        async with self._tx() as s:
            for inbox_id, message_id in done:
                values: dict[str, Any] = {"status": "done", "processed_at": now, "lease_until": None}
                if message_id is not None:
                    values["message_id"] = message_id
                await s.execute(update(inbox).where(inbox.c.id == inbox_id).values(error=None, **values))

    async def inbox_mark(
        self,
        ids: Sequence[int],
        status: Literal["done", "failed", "ignored"],
        *,
        error: str | None = None,
        message_id: int | None = None,
    ) -> None:
        """Finish items: their lease ends and they are never claimed again."""
        values: dict[str, Any] = {
            "status": status,
            "processed_at": utcnow(),
            "lease_until": None,
            "error": None if error is None else clean_text(error),
        }
        if message_id is not None:
            values["message_id"] = message_id
        async with self._tx() as s:
            for part in chunks(list(ids)):
                await s.execute(update(inbox).where(inbox.c.id.in_(part)).values(**values))

    async def inbox_renew(self, *, worker: str, lease_seconds: float) -> int:
        """Extend the live leases ``worker`` holds (a long turn is not a dead worker). Returns how many.

        A lease that already ran out stays out: its turn's next write is refused by the fence
        (gateway.store.fence), and renewing it would keep its items claimed by a turn that has
        been dropped, so that nobody served them."""
        async with self._tx() as s:
            now = await self.lease_now(s)
            result = await s.execute(
                update(inbox)
                .where(inbox.c.status == "processing", inbox.c.lease_owner == worker)
                .where(inbox.c.lease_until > now)
                .values(lease_until=now + timedelta(seconds=lease_seconds))
            )
            return rows_changed(result)

    async def inbox_release(self, *, worker: str, session_key: str | None = None) -> int:
        """Hand back the items ``worker`` still holds (it is stopping; or, with ``session_key``, it
        dropped that session's turn): pending again at once, not after the lease runs out, and the
        claim does not count as an attempt. Returns how many."""
        held = and_(inbox.c.status == "processing", inbox.c.lease_owner == worker)
        if session_key is not None:
            held = and_(held, inbox.c.session_key == session_key)
        async with self._tx() as s:
            result = await s.execute(
                update(inbox)
                .where(held)
                .values(
                    status="pending",
                    lease_owner=None,
                    lease_until=None,
                    attempts=case((inbox.c.attempts > 0, inbox.c.attempts - 1), else_=0),
                )
            )
            return rows_changed(result)

    async def inbox_fail(
        self,
        ids: Sequence[int],
        *,
        worker: str,
        error: str,
        max_attempts: int,
        retry_at: datetime,
        keep_failed: int = MAX_DEAD_LETTERS_PER_CHAT,
    ) -> list[InboxRecord]:
        """Serving these items failed. Those still held by ``worker`` are tried again from
        ``retry_at``, or, once claimed ``max_attempts`` times, marked failed (dead letters).
        A chat keeps its newest ``keep_failed`` dead letters: a flood cannot grow the table
        without end (nor push out another chat's). Returns the items given up on."""
        held = and_(inbox.c.id.in_(list(ids)), inbox.c.status == "processing", inbox.c.lease_owner == worker)
        error = clean_text(error)
        async with self._tx() as s:
            rows = (await s.execute(select(inbox).where(held).order_by(inbox.c.id))).mappings()
            records = [to_inbox(r) for r in rows]
            dead = [r.id for r in records if r.attempts >= max_attempts]
            retry = [r.id for r in records if r.attempts < max_attempts]
            if dead:
                await s.execute(
                    update(inbox)
                    .where(inbox.c.id.in_(dead))
                    .values(status="failed", error=error, processed_at=utcnow(), lease_until=None)
                )
                for key in sorted({r.session_key for r in records if r.id in dead}):
                    await _keep_newest_failed(s, key, keep_failed)
            if retry:
                due = await self.as_lease_time(s, retry_at)
                await s.execute(
                    update(inbox)
                    .where(inbox.c.id.in_(retry))
                    .values(status="pending", error=error, lease_owner=None, lease_until=due)
                )
            return [r for r in records if r.id in dead]

    async def inbox_next_retry(self, session_key: str) -> datetime | None:
        """When the session's next item waiting out a retry delay is due, on this process's clock
        (None: no such item)."""
        stmt = select(func.min(inbox.c.lease_until)).where(
            inbox.c.session_key == session_key, inbox.c.status == "pending", inbox.c.lease_until.is_not(None)
        )
        async with self._tx(write=False) as s:
            due: datetime | None = await s.scalar(stmt)
            if due is None or self._db.dialect != "postgresql":
                return due
            # Stored on the lease clock: told on this process's, as the caller compares it.
            return due - (await self.lease_now(s) - self._clock())

    async def inbox_get(self, inbox_id: int) -> InboxRecord:
        async with self._tx(write=False) as s:
            row = (await s.execute(select(inbox).where(inbox.c.id == inbox_id))).mappings().first()
            if row is None:
                raise NotFound(f"no inbox item {inbox_id}")
            return to_inbox(row)

    async def inbox_waiting(self) -> dict[str, datetime]:
        """Session keys whose pending items wait out a delay (a retry, a webhook's coalescing
        window), with when the first is due, on this process's clock: a start schedules them."""
        stmt = (
            select(inbox.c.session_key, func.min(inbox.c.lease_until))
            .where(inbox.c.status == "pending", inbox.c.lease_until.is_not(None))
            .group_by(inbox.c.session_key)
        )
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt)).all()
            skew = await self.lease_now(s) - self._clock() if self._db.dialect == "postgresql" else None
        return {str(key): due if skew is None else due - skew for key, due in rows if due is not None}

    async def inbox_pending_keys(self) -> list[str]:
        """Session keys with claimable work, the longest-waiting first."""
        stmt = (
            select(inbox.c.session_key)
            .where(_claimable(self.lease_clock()))
            .group_by(inbox.c.session_key)
            .order_by(func.min(inbox.c.received_at), inbox.c.session_key)
        )
        async with self._tx(write=False) as s:
            return [str(k) for k in await s.scalars(stmt)]


async def _keep_newest_failed(s: AsyncSession, session_key: str, keep: int) -> None:
    """Delete the chat's dead letters older than its newest ``keep``."""
    oldest_kept = await s.scalar(
        select(inbox.c.id)
        .where(inbox.c.session_key == session_key, inbox.c.status == "failed")
        .order_by(inbox.c.id.desc())
        .offset(max(keep, 1) - 1)
        .limit(1)
    )
    if oldest_kept is not None:
        await s.execute(
            delete(inbox).where(
                inbox.c.session_key == session_key, inbox.c.status == "failed", inbox.c.id < oldest_kept
            )
        )
