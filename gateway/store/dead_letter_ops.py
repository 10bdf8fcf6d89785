"""Reads of the dead letters: received messages and replies given up on, with their errors."""

from __future__ import annotations

from sqlalchemy import func, select

from gateway.store.base import Repo
from gateway.store.convert import to_inbox, to_outbox
from gateway.store.models import inbox, outbox, sessions
from gateway.store.records import DeadLetter, InboxRecord, OutboxRecord, SessionInfo

PREVIEW_CHARS = 200


def inbox_letter(item: InboxRecord) -> DeadLetter:
    return DeadLetter(
        source="inbox",
        id=item.id,
        at=item.received_at,
        attempts=item.attempts,
        error=item.error,
        text=str(item.payload.get("text") or "")[:PREVIEW_CHARS],
        platform=item.platform,
        chat_id=item.chat_id,
    )


def outbox_letter(row: OutboxRecord) -> DeadLetter:
    return DeadLetter(
        source="outbox",
        id=row.id,
        at=row.created_at,
        attempts=row.attempts,
        error=row.error,
        text=row.text[:PREVIEW_CHARS],
        platform=str(row.target.get("platform") or ""),
        chat_id=str(row.target.get("chat_id") or ""),
    )


class DeadLetterOps(Repo):
    async def dead_letters(self, session: SessionInfo | None = None, *, limit: int = 100) -> list[DeadLetter]:
        """Failed inbox items and outbox rows, newest first: of one session, or of every chat.

        A session's inbox items are those of its key received after the key's previous session
        ended (if any) and before this one did.
        """
        received = select(inbox).where(inbox.c.status == "failed")
        replies = select(outbox).where(outbox.c.status == "failed")
        async with self._tx(write=False) as s:
            if session is not None:
                previous_end = await s.scalar(
                    select(func.max(sessions.c.ended_at)).where(
                        sessions.c.key == session.key,
                        sessions.c.id != session.id,
                        sessions.c.ended_at <= session.created_at,
                    )
                )
                received = received.where(inbox.c.session_key == session.key)
                if previous_end is not None:
                    received = received.where(inbox.c.received_at > previous_end)
                if session.ended_at is not None:
                    received = received.where(inbox.c.received_at <= session.ended_at)
                replies = replies.where(outbox.c.session_id == session.id)
            received = received.order_by(inbox.c.received_at.desc(), inbox.c.id.desc()).limit(limit)
            replies = replies.order_by(outbox.c.created_at.desc(), outbox.c.id.desc()).limit(limit)
            letters = [inbox_letter(to_inbox(r)) for r in (await s.execute(received)).mappings()]
            letters += [outbox_letter(to_outbox(r)) for r in (await s.execute(replies)).mappings()]
        letters.sort(key=lambda d: (d.at, d.source == "outbox", d.id), reverse=True)
        return letters[:limit]
