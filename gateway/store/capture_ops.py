"""Ambient capture: group messages not addressed to the bot, stored in one transaction per batch.

An ambient message is only stored (it becomes context for a later turn). Appending each one
and marking its inbox item done cost two transactions and eight statements per message;
here a batch (what one claim returned for a session) costs one transaction and five
statements, run at once (on SQLite in one worker-thread call: ``Database.write_at_once``).
Same rules as :meth:`MessageOps.append_message`: rows go at the end of the session in order,
a platform message id already stored is not stored again, and the inbox items are done in
the same transaction as their rows (a crash leaves both or neither).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from agent.errors import NotFound
from agent.types import ChatMessage
from gateway.store.base import Repo, chunks
from gateway.store.columns import clean_json, utcnow
from gateway.store.convert import to_message
from gateway.store.message_ops import row_values
from gateway.store.models import inbox, messages, sessions


class CaptureOps(Repo):
    async def capture_messages(
        self, session_id: str, items: Sequence[tuple[int, ChatMessage]]
    ) -> list[ChatMessage]:
        """Append each ``(inbox id, message)`` and mark its inbox item done, in one transaction.

        Returns the stored messages in order (an already stored one as it was stored).
        """
        if not items:
            return []
        now = utcnow()
        prepared = [
            replace(
                m,
                content=clean_json(m.content),
                created_at=m.created_at or now,
                active=True,
                compacted=False,
                compaction_id=None,
            )
            for _, m in items
        ]
        return await self._db.write_at_once(lambda conn: _capture(conn, session_id, items, prepared, now))


def _capture(
    conn: Connection,
    session_id: str,
    items: Sequence[tuple[int, ChatMessage]],
    prepared: list[ChatMessage],
    now: datetime,
) -> list[ChatMessage]:
    # The session row lock serializes appenders on PostgreSQL, as in append_message.
    lock = select(sessions.c.id).where(sessions.c.id == session_id).with_for_update(key_share=True)
    if conn.scalar(lock) is None:
        raise NotFound(f"no session {session_id}")
    keys = [m.platform_message_id for m in prepared if m.platform_message_id is not None]
    stored: dict[str, ChatMessage] = {}
    for part in chunks(keys):
        same = select(messages).where(
            messages.c.session_id == session_id, messages.c.platform_message_id.in_(part)
        )
        for row in conn.execute(same).mappings():
            stored[str(row["platform_message_id"])] = to_message(row)
    last = conn.scalar(select(func.max(messages.c.seq)).where(messages.c.session_id == session_id))
    seq = last or 0
    result: list[ChatMessage] = []
    fresh: list[tuple[int, ChatMessage]] = []  # (index in result, message with its seq)
    for message in prepared:
        key = message.platform_message_id
        if key is not None and key in stored:
            result.append(stored[key])
            continue
        seq += 1
        placed = replace(message, seq=seq)
        fresh.append((len(result), placed))
        result.append(placed)
        if key is not None:
            stored[key] = placed  # a repeat later in this batch is the same message
    if fresh:
        add = insert(messages).returning(messages.c.id, sort_by_parameter_order=True)
        rows = conn.execute(add, [{**row_values(session_id, m), "seq": m.seq} for _, m in fresh])
        for (index, message), new_id in zip(fresh, rows.scalars(), strict=True):
            result[index] = replace(message, id=int(new_id))
            if message.platform_message_id is not None:
                stored[message.platform_message_id] = result[index]
    # Repeats within the batch now see the id their first occurrence got.
    result = [stored.get(m.platform_message_id or "", m) for m in result]
    done = (
        update(inbox)
        .where(inbox.c.id == bindparam("inbox_id"))
        .values(status="done", processed_at=now, lease_until=None, error=None, message_id=bindparam("mid"))
    )
    conn.execute(
        done, [{"inbox_id": inbox_id, "mid": m.id} for (inbox_id, _), m in zip(items, result, strict=True)]
    )
    return result
