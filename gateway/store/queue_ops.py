"""The durable inbox (intake) and outbox (delivery)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession

from agent.errors import NotFound
from gateway.store.base import Repo, chunks
from gateway.store.columns import clean_json, clean_text, utcnow
from gateway.store.convert import to_inbox, to_outbox
from gateway.store.group_commit import InboxBatch, OutboxSentBatch
from gateway.store.lease_ops import MAX_NAME, acquire_in
from gateway.store.models import inbox, outbox
from gateway.store.records import InboxRecord, OutboxKind, OutboxRecord


def _claimable(now: datetime) -> ColumnElement[bool]:
    """Pending (and not waiting out a retry delay), or taken by a worker whose lease ran out.

    On a pending item ``lease_until`` is the time before which it is not tried again (set
    when serving it failed); a new item has none.
    """
    return or_(
        and_(inbox.c.status == "pending", or_(inbox.c.lease_until.is_(None), inbox.c.lease_until <= now)),
        and_(inbox.c.status == "processing", inbox.c.lease_until < now),
    )


def _held_elsewhere(session_key: str, worker: str, now: datetime) -> ColumnElement[bool]:
    """Another worker holds a live lease on an item of the session: it is serving it."""
    other = inbox.alias("other")
    return exists().where(
        other.c.session_key == session_key,
        other.c.status == "processing",
        other.c.lease_until >= now,
        other.c.lease_owner != worker,
    )


async def claim_in(
    s: AsyncSession,
    dialect: str,
    *,
    worker: str,
    lease_seconds: float,
    session_key: str | None,
    limit: int,
) -> list[InboxRecord]:
    """:meth:`QueueOps.inbox_claim` inside the transaction ``s``."""
    now = utcnow()
    chosen = select(inbox.c.id).where(_claimable(now))
    if session_key is not None:
        chosen = chosen.where(inbox.c.session_key == session_key)
    chosen = chosen.order_by(inbox.c.received_at, inbox.c.id).limit(limit).with_for_update(skip_locked=True)
    # One UPDATE ... RETURNING takes them (and checks the session's lease in the same breath).
    claim = update(inbox).where(inbox.c.id.in_(chosen.scalar_subquery()))
    if session_key is not None:
        claim = claim.where(~_held_elsewhere(session_key, worker, now))
    claim = claim.values(
        status="processing",
        lease_owner=worker,
        lease_until=now + timedelta(seconds=lease_seconds),
        attempts=inbox.c.attempts + 1,
    ).returning(*inbox.c)
    if session_key is not None and dialect == "postgresql":
        # Claims for one key one at a time, so two cannot both see it free.
        await s.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(session_key, 0))))
    rows = [to_inbox(r) for r in (await s.execute(claim)).mappings()]
    return sorted(rows, key=lambda r: (r.received_at, r.id))


class QueueOps(Repo):
    async def inbox_put(
        self,
        *,
        platform: str,
        chat_id: str,
        platform_message_id: str | None,
        session_key: str,
        payload: dict[str, Any],
        addressed: bool,
    ) -> tuple[int, bool]:
        """Persist a received message; ``(id, created)``. The same platform message is stored once.

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
        }
        batch: InboxBatch | None = getattr(self, "_inbox_batch", None)
        if batch is None:
            batch = self._inbox_batch = InboxBatch(self._db)
        return await batch.put(values)

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
        async with self._tx() as s:
            return await claim_in(
                s,
                self.db.dialect,
                worker=worker,
                lease_seconds=lease_seconds,
                session_key=session_key,
                limit=limit,
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
        """Extend the leases ``worker`` holds (a long turn is not a dead worker). Returns how many."""
        async with self._tx() as s:
            result = await s.execute(
                update(inbox)
                .where(inbox.c.status == "processing", inbox.c.lease_owner == worker)
                .values(lease_until=utcnow() + timedelta(seconds=lease_seconds))
            )
            return int(getattr(result, "rowcount", 0) or 0)

    async def inbox_release(self, *, worker: str) -> int:
        """Hand back the items ``worker`` still holds (it is stopping): pending again at once, not
        after the lease runs out, and the claim does not count as an attempt. Returns how many."""
        async with self._tx() as s:
            result = await s.execute(
                update(inbox)
                .where(inbox.c.status == "processing", inbox.c.lease_owner == worker)
                .values(
                    status="pending",
                    lease_owner=None,
                    lease_until=None,
                    attempts=case((inbox.c.attempts > 0, inbox.c.attempts - 1), else_=0),
                )
            )
            return int(getattr(result, "rowcount", 0) or 0)

    async def inbox_fail(
        self, ids: Sequence[int], *, worker: str, error: str, max_attempts: int, retry_at: datetime
    ) -> list[InboxRecord]:
        """Serving these items failed. Those still held by ``worker`` are tried again from
        ``retry_at``, or, once claimed ``max_attempts`` times, marked failed (dead letters).
        Returns the items given up on."""
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
            if retry:
                await s.execute(
                    update(inbox)
                    .where(inbox.c.id.in_(retry))
                    .values(status="pending", error=error, lease_owner=None, lease_until=retry_at)
                )
            return [r for r in records if r.id in dead]

    async def inbox_next_retry(self, session_key: str) -> datetime | None:
        """When the session's next item waiting out a retry delay is due (None: no such item)."""
        stmt = select(func.min(inbox.c.lease_until)).where(
            inbox.c.session_key == session_key, inbox.c.status == "pending", inbox.c.lease_until.is_not(None)
        )
        async with self._tx(write=False) as s:
            due: datetime | None = await s.scalar(stmt)
            return due

    async def inbox_get(self, inbox_id: int) -> InboxRecord:
        async with self._tx(write=False) as s:
            row = (await s.execute(select(inbox).where(inbox.c.id == inbox_id))).mappings().first()
            if row is None:
                raise NotFound(f"no inbox item {inbox_id}")
            return to_inbox(row)

    async def inbox_pending_keys(self) -> list[str]:
        """Session keys with claimable work, the longest-waiting first."""
        stmt = (
            select(inbox.c.session_key)
            .where(_claimable(utcnow()))
            .group_by(inbox.c.session_key)
            .order_by(func.min(inbox.c.received_at), inbox.c.session_key)
        )
        async with self._tx(write=False) as s:
            return [str(k) for k in await s.scalars(stmt)]

    async def outbox_put(
        self,
        *,
        session_id: str | None,
        target: dict[str, Any],
        text: str,
        inbox_ids: list[int],
        message_id: int | None,
        kind: OutboxKind = "reply",
        answers: Sequence[tuple[int, int | None]] = (),
        status: Literal["done", "failed"] = "done",
        error: str | None = None,
    ) -> int:
        """Queue a reply. ``answers`` (inbox id, message id) are the items it answers: they are
        marked ``status`` in the same transaction (one commit per reply, and never a reply
        queued without its items done, nor the reverse)."""
        now = utcnow()
        add = (
            insert(outbox)
            .values(
                session_id=session_id,
                target=clean_json(target),
                text=clean_text(text),
                status="pending",
                attempts=0,
                next_attempt_at=now,
                delivered_ids=[],
                created_at=now,
                message_id=message_id,
                inbox_ids=list(inbox_ids),
                kind=kind,
            )
            .returning(outbox.c.id)
        )
        done = (
            update(inbox)
            .where(inbox.c.id == bindparam("item_id"))
            .values(
                status=status,
                processed_at=now,
                lease_until=None,
                error=None if error is None else clean_text(error),
                message_id=func.coalesce(bindparam("mid"), inbox.c.message_id),
            )
        )

        def write(conn: Connection) -> int:
            if answers:
                conn.execute(done, [{"item_id": i, "mid": m} for i, m in answers])
            return int(conn.scalar(add) or 0)

        # One worker-thread call on SQLite instead of a hop per statement (Database.write_at_once).
        return await self._db.write_at_once(write)

    async def outbox_due(self, now: datetime, limit: int = 50) -> list[OutboxRecord]:
        """Pending replies whose next attempt is due, oldest first."""
        stmt = (
            select(outbox)
            .where(outbox.c.status == "pending", outbox.c.next_attempt_at <= now)
            .order_by(outbox.c.id)
            .limit(limit)
        )
        async with self._tx(write=False) as s:
            return [to_outbox(r) for r in (await s.execute(stmt)).mappings()]

    async def outbox_claim(
        self,
        *,
        now: datetime,
        lease_seconds: float,
        platforms: Sequence[str],
        limit: int = 50,
        owner: str | None = None,
    ) -> list[OutboxRecord]:
        """Take the due replies for ``platforms``, oldest first, for one delivery round.

        Taking a row moves its next attempt ``lease_seconds`` ahead, so another worker does not
        send it meanwhile; sent, retried or failed, the row's next state replaces that. A worker
        that dies mid-send leaves the row due again once the lease passes (at-least-once).

        With ``owner`` (several workers deliver), the claim is per chat: the round also takes the
        chat's lease (:func:`outbox_chat_lease`), and a chat whose lease another worker holds is
        left alone, so its later replies cannot overtake the ones that worker is still sending.
        The caller releases the chat leases when the chat's rows are done.
        """
        if not platforms:
            return []
        if owner is not None:
            return await self._outbox_claim_chats(now, lease_seconds, platforms, limit, owner)
        platform = outbox.c.target["platform"].as_string()
        stmt = (
            select(outbox.c.id)
            .where(outbox.c.status == "pending", outbox.c.next_attempt_at <= now, platform.in_(platforms))
            .order_by(outbox.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        async with self._tx() as s:
            ids = [int(i) for i in await s.scalars(stmt)]
            if not ids:
                return []
            rows = (
                await s.execute(select(outbox).where(outbox.c.id.in_(ids)).order_by(outbox.c.id))
            ).mappings()
            taken = [to_outbox(r) for r in rows]
            await s.execute(
                update(outbox)
                .where(outbox.c.id.in_(ids))
                .values(next_attempt_at=now + timedelta(seconds=lease_seconds))
            )
            return taken

    async def outbox_get(self, outbox_id: int) -> OutboxRecord:
        async with self._tx(write=False) as s:
            row = (await s.execute(select(outbox).where(outbox.c.id == outbox_id))).mappings().first()
            if row is None:
                raise NotFound(f"no outbox item {outbox_id}")
            return to_outbox(row)

    async def _outbox_update(self, outbox_id: int, **values: Any) -> None:
        async with self._tx() as s:
            result = await s.execute(
                update(outbox)
                .where(outbox.c.id == outbox_id)
                .values(attempts=outbox.c.attempts + 1, **values)
            )
            if getattr(result, "rowcount", 0) == 0:
                raise NotFound(f"no outbox item {outbox_id}")

    async def outbox_mark_sent(self, outbox_id: int, platform_ids: list[str]) -> None:
        """Record a sent reply; returns once committed (concurrent calls share a transaction)."""
        batch: OutboxSentBatch | None = getattr(self, "_sent_batch", None)
        if batch is None:
            batch = self._sent_batch = OutboxSentBatch(self._db)
        await batch.put({"row_id": outbox_id, "at": utcnow(), "ids": [str(i) for i in platform_ids]})

    async def outbox_mark_retry(self, outbox_id: int, *, next_attempt_at: datetime, error: str) -> None:
        await self._outbox_update(
            outbox_id, status="pending", next_attempt_at=next_attempt_at, error=clean_text(error)
        )

    async def outbox_mark_failed(self, outbox_id: int, error: str) -> None:
        await self._outbox_update(outbox_id, status="failed", error=clean_text(error))

    async def outbox_for_inbox(self, inbox_id: int) -> OutboxRecord | None:
        """The latest reply queued for inbox item ``inbox_id`` (its ``inbox_ids`` contain it)."""
        contains: ColumnElement[bool]
        if self._db.dialect == "postgresql":
            contains = literal_column("outbox.inbox_ids::jsonb").bool_op("@>")(
                func.jsonb_build_array(inbox_id)
            )
        else:
            each = func.json_each(outbox.c.inbox_ids).table_valued("value")
            contains = exists(select(1).select_from(each).where(each.c.value == inbox_id))
        stmt = select(outbox).where(contains).order_by(outbox.c.id.desc()).limit(1)
        async with self._tx(write=False) as s:
            row = (await s.execute(stmt)).mappings().first()
            return None if row is None else to_outbox(row)

    async def _outbox_claim_chats(
        self, now: datetime, lease_seconds: float, platforms: Sequence[str], limit: int, owner: str
    ) -> list[OutboxRecord]:
        platform = outbox.c.target["platform"].as_string()
        stmt = (
            select(outbox)
            .where(outbox.c.status == "pending", outbox.c.next_attempt_at <= now, platform.in_(platforms))
            .order_by(outbox.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        async with self._tx() as s:
            rows = [to_outbox(r) for r in (await s.execute(stmt)).mappings()]
            chats = sorted({outbox_chat_lease(row.target) for row in rows})
            # Sorted: two rounds lock chats in one order, so their advisory locks cannot deadlock.
            mine = set()
            for chat in chats:
                if await acquire_in(s, self.db.dialect, chat, owner, ttl_seconds=lease_seconds, now=now):
                    mine.add(chat)
            taken = [row for row in rows if outbox_chat_lease(row.target) in mine]
            if taken:
                await s.execute(
                    update(outbox)
                    .where(outbox.c.id.in_([row.id for row in taken]))
                    .values(next_attempt_at=now + timedelta(seconds=lease_seconds))
                )
            return taken


def outbox_chat_lease(target: dict[str, Any]) -> str:
    """The lease a delivery round holds on one chat: ``outbox:<platform>:<chat id>``."""
    return f"outbox:{target.get('platform')}:{target.get('chat_id')}"[:MAX_NAME]
