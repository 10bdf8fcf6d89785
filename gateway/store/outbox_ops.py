"""The durable outbox: replies queued with the items they answer, claimed chat by chat for a
delivery round, and marked sent, retried or failed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    bindparam,
    exists,
    func,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.engine import Connection

from agent.clock import utcnow
from agent.errors import NotFound
from gateway.store.base import Repo
from gateway.store.columns import clean_json, clean_text, rows_changed
from gateway.store.convert import to_outbox
from gateway.store.group_commit import OutboxSentBatch
from gateway.store.lease_ops import MAX_NAME, acquire_in
from gateway.store.models import inbox, outbox, streams
from gateway.store.records import OutboxKind, OutboxRecord
from gateway.store.wakeups import notify_outbox

# Built once: a reply is queued per turn, and building a statement costs more than running it.
_QUEUE_REPLY = insert(outbox).returning(outbox.c.id)
# On PostgreSQL a reply is due by the database's clock, which every node's delivery claims by.
_QUEUE_REPLY_DUE_NOW = insert(outbox).values(next_attempt_at=func.now()).returning(outbox.c.id)
_ANSWERED = (
    update(inbox)
    .where(inbox.c.id == bindparam("item_id"))
    .values(
        status=bindparam("done", type_=inbox.c.status.type),
        processed_at=bindparam("at", type_=inbox.c.processed_at.type),
        lease_until=None,
        error=bindparam("why", type_=inbox.c.error.type),
        message_id=func.coalesce(bindparam("mid", type_=inbox.c.message_id.type), inbox.c.message_id),
    )
)


class OutboxOps(Repo):
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
        stream_id: int | None = None,
    ) -> int:
        """Queue a reply. ``answers`` (inbox id, message id) are the items it answers: they are
        marked ``status`` in the same transaction (one commit per reply, and never a reply
        queued without its items done, nor the reverse). ``stream_id``: an orphaned stream that
        already shows this reply (a takeover re-delivers it): delivery edits its messages, and
        the stream is the reply's from this transaction on (no recovery marks it interrupted)."""
        now = utcnow()
        row = {
            "session_id": session_id,
            "target": clean_json(target),
            "text": clean_text(text),
            "status": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "delivered_ids": [],
            "created_at": now,
            "message_id": message_id,
            "inbox_ids": list(inbox_ids),
            "kind": kind,
            "stream_id": stream_id,
        }
        reason = None if error is None else clean_text(error)
        answered = [{"item_id": i, "mid": m, "done": status, "at": now, "why": reason} for i, m in answers]

        queue = _QUEUE_REPLY
        if self._db.dialect == "postgresql":
            queue = _QUEUE_REPLY_DUE_NOW
            del row["next_attempt_at"]

        def write(conn: Connection) -> int:
            if answered:
                conn.execute(_ANSWERED, answered)
            row_id = int(conn.scalar(queue, row) or 0)
            if stream_id is not None:
                conn.execute(update(streams).where(streams.c.id == stream_id).values(outbox_id=row_id))
            notify_outbox(conn)
            return row_id

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

        def take(conn: Connection) -> list[OutboxRecord]:
            at = self.lease_now_in(conn, now)
            stmt = (
                select(outbox.c.id)
                .where(outbox.c.status == "pending", outbox.c.next_attempt_at <= at, platform.in_(platforms))
                .order_by(outbox.c.id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            ids = [int(i) for i in conn.scalars(stmt)]
            if not ids:
                return []
            rows = conn.execute(select(outbox).where(outbox.c.id.in_(ids)).order_by(outbox.c.id)).mappings()
            taken = [to_outbox(r) for r in rows]
            conn.execute(
                update(outbox)
                .where(outbox.c.id.in_(ids))
                .values(next_attempt_at=at + timedelta(seconds=lease_seconds))
            )
            return taken

        # One worker-thread call on SQLite: a round runs after every reply, next to the turns.
        return await self._db.write_at_once(take)

    async def outbox_renew(
        self, ids: Sequence[int], *, owner: str, lease_seconds: float, now: datetime | None = None
    ) -> int:
        """Keep a delivery round's claim while it sends: its chats' leases and the due time of its
        rows still pending move ``lease_seconds`` ahead. A chat whose lease ``owner`` lost keeps its
        rows as they are. Returns how many rows were renewed."""
        if not ids:
            return 0
        async with self._tx() as s:
            at = await self.lease_now(s, now)
            rows = [
                to_outbox(r)
                for r in (
                    await s.execute(
                        select(outbox).where(outbox.c.id.in_(list(ids)), outbox.c.status == "pending")
                    )
                ).mappings()
            ]
            mine: set[str] = set()
            for chat in sorted({outbox_chat_lease(row.target) for row in rows}):
                current = await acquire_in(s, self.db.dialect, chat, owner, ttl_seconds=lease_seconds, now=at)
                if current is not None:
                    mine.add(chat)
            kept = [row.id for row in rows if outbox_chat_lease(row.target) in mine]
            if kept:
                await s.execute(
                    update(outbox)
                    .where(outbox.c.id.in_(kept))
                    .values(next_attempt_at=at + timedelta(seconds=lease_seconds))
                )
            return len(kept)

    async def outbox_chat_pending(self, target: dict[str, Any]) -> bool:
        """Whether a reply or notice to ``target``'s chat is still pending (not yet sent or failed)."""
        stmt = select(
            exists().where(
                outbox.c.status == "pending",
                outbox.c.target["platform"].as_string() == str(target.get("platform")),
                outbox.c.target["chat_id"].as_string() == str(target.get("chat_id")),
            )
        )
        async with self._tx(write=False) as s:
            return bool(await s.scalar(stmt))

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
            if rows_changed(result) == 0:
                raise NotFound(f"no outbox item {outbox_id}")

    async def outbox_mark_sent(self, outbox_id: int, platform_ids: list[str]) -> None:
        """Record a sent reply; returns once committed (concurrent calls share a transaction)."""
        batch: OutboxSentBatch | None = getattr(self, "_sent_batch", None)
        if batch is None:
            batch = self._sent_batch = OutboxSentBatch(self._db)
        await batch.put({"row_id": outbox_id, "at": utcnow(), "ids": [str(i) for i in platform_ids]})

    async def outbox_mark_retry(self, outbox_id: int, *, next_attempt_at: datetime, error: str) -> None:
        """Try the row again at ``next_attempt_at`` (this process's clock)."""
        async with self._tx() as s:
            due = await self.as_lease_time(s, next_attempt_at)
            result = await s.execute(
                update(outbox)
                .where(outbox.c.id == outbox_id)
                .values(
                    attempts=outbox.c.attempts + 1,
                    status="pending",
                    next_attempt_at=due,
                    error=clean_text(error),
                )
            )
            if rows_changed(result) == 0:
                raise NotFound(f"no outbox item {outbox_id}")

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
        async with self._tx() as s:
            at = await self.lease_now(s, now)
            stmt = (
                select(outbox)
                .where(outbox.c.status == "pending", outbox.c.next_attempt_at <= at, platform.in_(platforms))
                .order_by(outbox.c.id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            rows = [to_outbox(r) for r in (await s.execute(stmt)).mappings()]
            chats = sorted({outbox_chat_lease(row.target) for row in rows})
            # Sorted: two rounds lock chats in one order, so their advisory locks cannot deadlock.
            mine = set()
            for chat in chats:
                if await acquire_in(s, self.db.dialect, chat, owner, ttl_seconds=lease_seconds, now=at):
                    mine.add(chat)
            taken = [row for row in rows if outbox_chat_lease(row.target) in mine]
            if taken:
                await s.execute(
                    update(outbox)
                    .where(outbox.c.id.in_([row.id for row in taken]))
                    .values(next_attempt_at=at + timedelta(seconds=lease_seconds))
                )
            return taken


def outbox_chat_lease(target: dict[str, Any]) -> str:
    """The lease a delivery round holds on one chat: ``outbox:<platform>:<chat id>``."""
    return f"outbox:{target.get('platform')}:{target.get('chat_id')}"[:MAX_NAME]
