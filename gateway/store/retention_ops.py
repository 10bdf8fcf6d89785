"""Retention (off unless configured): deleting archived messages older than N days.

The unit is a compaction: its archived messages go once every one of them (summaries aside) is
older than the cutoff, all in one transaction, so a tool call is never separated from its result. Only rows a
compaction archived are candidates: active rows never, and summaries never (neither the one in
the active view nor an earlier one a re-compression archived): the summary is what replaced
the deleted text. Each deleted row leaves the full-text index with it (the FTS5 delete
trigger on SQLite; the generated column on PostgreSQL). A compaction whose messages were
deleted can no longer be undone (``restore_latest_compaction`` refuses it).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, exists, select

from gateway.store.base import Repo
from gateway.store.columns import rows_changed
from gateway.store.models import compactions, messages

BATCH = 200
"""Compactions per transaction."""


class RetentionOps(Repo):
    async def delete_archived(self, *, before: datetime) -> dict[str, int]:
        """Delete the archived (non-summary) messages of every compaction whose archived messages
        all predate ``before``; counts of messages deleted and compactions they came from."""
        # A summary it archived (a re-compression) is kept anyway, so its age does not count.
        recent = exists().where(
            messages.c.compaction_id == compactions.c.id,
            messages.c.kind != "summary",
            messages.c.created_at >= before,
        )
        deletable = exists().where(
            messages.c.compaction_id == compactions.c.id,
            messages.c.kind != "summary",
            messages.c.active.is_(False),
        )
        units = (
            select(compactions.c.id)
            .where(compactions.c.restored_at.is_(None), ~recent, deletable)
            .order_by(compactions.c.created_at, compactions.c.id)
            .limit(BATCH)
        )
        deleted = pruned = 0
        while True:
            async with self._tx() as s:
                ids = [str(i) for i in await s.scalars(units)]
                if not ids:
                    return {"messages_deleted": deleted, "compactions_pruned": pruned}
                result = await s.execute(
                    delete(messages).where(
                        and_(
                            messages.c.compaction_id.in_(ids),
                            messages.c.kind != "summary",
                            messages.c.active.is_(False),
                        )
                    )
                )
                deleted += rows_changed(result)
                pruned += len(ids)
