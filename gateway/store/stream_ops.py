"""Streamed replies: the open stream of a turn, and turning it into a delivered outbox row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select, update

from agent.clock import utcnow
from gateway.store.base import Repo
from gateway.store.columns import clean_json, clean_text
from gateway.store.models import outbox, streams
from gateway.store.records import StreamRecord


class StreamOps(Repo):
    async def stream_open(self, *, session_id: str | None, target: dict[str, Any]) -> int:
        """A new open stream, before its first platform message is sent."""
        now = utcnow()
        async with self._tx() as s:
            new_id = await s.scalar(
                insert(streams)
                .values(
                    session_id=session_id,
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
        """Streams still open (on start: cut short by a crash)."""
        async with self._tx(write=False) as s:
            rows = (
                await s.execute(select(streams).where(streams.c.status == "open").order_by(streams.c.id))
            ).mappings()
            return [
                StreamRecord(
                    id=int(r["id"]),
                    session_id=r["session_id"],
                    target=dict(r["target"] or {}),
                    message_ids=[str(x) for x in r["message_ids"] or []],
                    shown=[str(x) for x in r["shown"] or []],
                    status=str(r["status"]),
                )
                for r in rows
            ]
