"""Streamed replies: the open stream of a turn, and turning it into a delivered outbox row.

A stream belongs to the session lease it was opened under (the fence's worker and session key):
it is an orphan once that lease has lapsed, and only then may another worker touch it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, RowMapping, and_, exists, insert, or_, select, update

from agent.clock import utcnow
from gateway.store import fence
from gateway.store.base import Repo
from gateway.store.columns import clean_json, clean_text
from gateway.store.models import inbox, outbox, streams
from gateway.store.records import StreamRecord


def _record(r: RowMapping) -> StreamRecord:
    return StreamRecord(
        id=int(r["id"]),
        session_id=r["session_id"],
        target=dict(r["target"] or {}),
        message_ids=[str(x) for x in r["message_ids"] or []],
        shown=[str(x) for x in r["shown"] or []],
        status=str(r["status"]),
        session_key=r["session_key"],
        lease_owner=r["lease_owner"],
    )


class StreamOps(Repo):
    async def stream_open(self, *, session_id: str | None, target: dict[str, Any]) -> int:
        """A new open stream, before its first platform message is sent."""
        now = utcnow()
        held = fence.current()
        async with self._tx() as s:
            new_id = await s.scalar(
                insert(streams)
                .values(
                    session_id=session_id,
                    session_key=None if held is None else held.session_key,
                    lease_owner=None if held is None else held.worker,
                    target=clean_json(target),
                    message_ids=[],
                    shown=[],
                    status="open",
                    created_at=now,
                    updated_at=now,
                )
                .returning(streams.c.id)
            )
            return int(new_id or 0)

    async def stream_update(self, stream_id: int, *, message_ids: list[str], shown: list[str]) -> None:
        """What the stream's messages show now (so a restart can tell them they were cut short)."""
        async with self._tx() as s:
            await s.execute(
                update(streams)
                .where(streams.c.id == stream_id)
                .values(
                    message_ids=list(message_ids), shown=[clean_text(t) for t in shown], updated_at=utcnow()
                )
            )

    async def stream_deliver(
        self,
        stream_id: int,
        *,
        text: str,
        message_ids: list[str],
        inbox_ids: list[int],
        message_id: int | None,
    ) -> int:
        """In one transaction: the finished reply as an outbox row already sent (its platform ids
        are the streamed messages, so delivery never sends it again), and the stream closed."""
        now = utcnow()
        async with self._tx() as s:
            row = (await s.execute(select(streams).where(streams.c.id == stream_id))).mappings().one()
            outbox_id = await s.scalar(
                insert(outbox)
                .values(
                    session_id=row["session_id"],
                    target=row["target"],
                    text=clean_text(text),
                    status="sent",
                    attempts=1,
                    next_attempt_at=now,
                    delivered_ids=list(message_ids),
                    created_at=now,
                    sent_at=now,
                    message_id=message_id,
                    inbox_ids=list(inbox_ids),
                )
                .returning(outbox.c.id)
            )
            await s.execute(
                update(streams)
                .where(streams.c.id == stream_id)
                # The text now lives in the outbox row: the stream keeps only the message ids.
                .values(
                    status="done",
                    outbox_id=outbox_id,
                    message_ids=list(message_ids),
                    shown=[],
                    updated_at=now,
                )
            )
            return int(outbox_id or 0)

    async def stream_close(self, stream_id: int, status: str = "interrupted") -> None:
        async with self._tx() as s:
            await s.execute(
                update(streams)
                .where(streams.c.id == stream_id)
                .values(status=status, shown=[], updated_at=utcnow())
            )

    async def streams_open(self) -> list[StreamRecord]:
        """Streams still open, whoever holds them."""
        async with self._tx(write=False) as s:
            rows = (
                await s.execute(select(streams).where(streams.c.status == "open").order_by(streams.c.id))
            ).mappings()
            return [_record(r) for r in rows]

    async def streams_orphaned(
        self,
        *,
        worker: str,
        session_key: str | None = None,
        only_lapsed: bool = True,
        settled_only: bool = False,
    ) -> list[StreamRecord]:
        """Open streams no live session lease holds any more (their worker died, froze or gave the
        chat up), of ``session_key`` or of every chat; never ``worker``'s own. A stream a
        re-delivered reply has adopted (``outbox_id`` set) is the delivery's, not an orphan.
        ``only_lapsed=False`` (one SQLite process starting): every other worker's stream.
        ``settled_only``: only those whose chat has nothing left to serve (the rest are the
        business of the worker that takes the chat over)."""
        orphan: ColumnElement[bool] = and_(
            streams.c.status == "open",
            streams.c.outbox_id.is_(None),
            or_(streams.c.lease_owner.is_(None), streams.c.lease_owner != worker),
        )
        if only_lapsed:
            live = exists().where(
                inbox.c.session_key == streams.c.session_key,
                inbox.c.status == "processing",
                inbox.c.lease_owner == streams.c.lease_owner,
                inbox.c.lease_until > self.lease_clock(),
            )
            orphan = and_(orphan, ~live)
        if settled_only:
            unserved = exists().where(
                inbox.c.session_key == streams.c.session_key, inbox.c.status.in_(("pending", "processing"))
            )
            orphan = and_(orphan, ~unserved)
        if session_key is not None:
            orphan = and_(orphan, streams.c.session_key == session_key)
        async with self._tx(write=False) as s:
            rows = (await s.execute(select(streams).where(orphan).order_by(streams.c.id))).mappings()
            return [_record(r) for r in rows]

    async def stream_redelivered(self, stream_id: int, outbox_id: int, message_ids: list[str]) -> None:
        """A re-delivered reply now shows in the stream's messages: in one transaction the outbox
        row is sent (its platform ids are those messages) and the stream is done."""
        now = utcnow()
        async with self._tx() as s:
            await s.execute(
                update(outbox)
                .where(outbox.c.id == outbox_id)
                .values(
                    status="sent",
                    attempts=outbox.c.attempts + 1,
                    delivered_ids=list(message_ids),
                    sent_at=now,
                )
            )
            await s.execute(
                update(streams)
                .where(streams.c.id == stream_id)
                .values(status="done", outbox_id=outbox_id, shown=[], updated_at=now)
            )

    async def streams_adopted(self, ids: list[int]) -> list[StreamRecord]:
        """Those of streams ``ids`` that a re-delivered reply has taken (their ``outbox_id`` set)."""
        if not ids:
            return []
        stmt = select(streams).where(streams.c.id.in_(ids), streams.c.outbox_id.is_not(None))
        async with self._tx(write=False) as s:
            return [_record(r) for r in (await s.execute(stmt)).mappings()]

    async def stream_get(self, stream_id: int) -> StreamRecord | None:
        async with self._tx(write=False) as s:
            row = (await s.execute(select(streams).where(streams.c.id == stream_id))).mappings().first()
            return None if row is None else _record(row)

    async def stream_fence_check(self) -> None:
        """Raise :class:`~gateway.store.fence.LeaseLost` when the running turn's session lease is
        lost (PostgreSQL; a live reply asks before each platform edit, so a worker woken past its
        lease does not overwrite what the new owner wrote)."""
        if self._db.dialect != "postgresql" or fence.current() is None:
            return
        async with self._tx():  # the fence checks (and locks) the claim as the transaction opens
            pass
