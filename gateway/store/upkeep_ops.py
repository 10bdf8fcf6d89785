"""Database upkeep: engine housekeeping and pruning of finished queue rows. Each step says what it did.

SQLite: ``PRAGMA optimize`` (refreshes the planner's statistics where they are stale), an
``optimize`` of every FTS5 index (merges its segments), and a WAL checkpoint that truncates the
write-ahead log. PostgreSQL: ``ANALYZE`` of the hot tables (autovacuum does the rest).

Pruning removes inbox rows that are done (or ignored), outbox rows that were sent, and tasks
that finished, once older than N days. The messages they produced stay: the conversation
never depended on them. N is at least 2 days, longer than any platform redelivers an update,
so a pruned inbox row cannot let an old message in twice.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, text

from gateway.store.base import Repo
from gateway.store.columns import rows_changed
from gateway.store.models import inbox, outbox, scheduled_tasks, streams

HOT_TABLES = ("sessions", "messages", "compactions", "usage", "inbox", "outbox", "scheduled_tasks")
_FTS_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'"
)


def _file_size(path: str | None) -> int:
    if not path:
        return 0
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class UpkeepOps(Repo):
    async def prune_finished(self, *, before: datetime) -> dict[str, int]:
        """Delete finished inbox/outbox rows and tasks older than ``before``; counts by table."""
        async with self._tx() as s:
            inbox_gone = await s.execute(
                delete(inbox).where(
                    inbox.c.status.in_(("done", "ignored")),
                    func.coalesce(inbox.c.processed_at, inbox.c.received_at) < before,
                )
            )
            outbox_gone = await s.execute(
                delete(outbox).where(
                    outbox.c.status == "sent", func.coalesce(outbox.c.sent_at, outbox.c.created_at) < before
                )
            )
            tasks_gone = await s.execute(
                delete(scheduled_tasks).where(
                    scheduled_tasks.c.status.in_(("done", "cancelled")), scheduled_tasks.c.ended_at < before
                )
            )
            streams_gone = await s.execute(  # a finished stream's reply is in its outbox row
                delete(streams).where(streams.c.status != "open", streams.c.updated_at < before)
            )
            return {
                "streams_pruned": rows_changed(streams_gone),
                "inbox_pruned": rows_changed(inbox_gone),
                "outbox_pruned": rows_changed(outbox_gone),
                "tasks_pruned": rows_changed(tasks_gone),
            }

    async def optimize_engine(self) -> dict[str, int]:
        """The engine's own housekeeping (see the module docstring); what it did, as counts."""
        if self.db.dialect == "postgresql":
            async with self._tx() as s:
                for table in HOT_TABLES:
                    await s.execute(text(f'ANALYZE "{table}"'))
            return {"tables_analyzed": len(HOT_TABLES)}
        return await self._sqlite_upkeep()

    async def _sqlite_upkeep(self) -> dict[str, int]:
        database = self.db.url.database
        wal = f"{database}-wal" if database and database != ":memory:" else None
        before = await asyncio.to_thread(_file_size, wal)
        async with self.db.engine.connect() as conn:
            # On the driver's own connection: a checkpoint cannot run inside the BEGIN that
            # SQLAlchemy (and our begin hook) would open around every statement.
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            await driver.execute("PRAGMA analysis_limit = 400")
            await driver.execute("PRAGMA optimize")
            fts = [str(row[0]) for row in await (await driver.execute(_FTS_TABLES)).fetchall()]
            for name in fts:
                await driver.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'optimize\')')
            await driver.commit()
        busy = await self.db.truncate_log()
        after = await asyncio.to_thread(_file_size, wal)
        return {
            "planner_optimized": 1,
            "fts_indexes_optimized": len(fts),
            "wal_bytes_before": before,
            "wal_bytes_after": after,
            "checkpoint_blocked": int(busy),
        }
