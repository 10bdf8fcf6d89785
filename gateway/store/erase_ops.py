"""Erasing a user's data on request: the one deliberate exception to "never delete".

What goes, in ONE transaction:
- every message the platform user authored, in every session, active or archived (with its
  edit history; the search index follows: SQLite's FTS triggers, PostgreSQL's generated column);
- the inbox rows of their messages (they hold the same text);
- the memory-tool files of their own direct-message chats;
- the reminders and recurring tasks of their own direct-message chats (a task's prompt is their
  words), with the turns those tasks ran and the inbox items that queued them.

Summaries are **redacted**, not regenerated: a summary made by a compaction that archived one of
their messages (or an earlier redacted summary) gets its body replaced by a notice that says so
and points at the archived messages that remain. Regenerating would send what is left to a model
again and could restate what the user said through the bot's replies; redaction keeps nothing
derived from the erased words. The bot's own replies stay: they are not the user's messages.

Where the erased messages opened a session's active view, a short notice takes their place, so
the view still starts with a user turn, as the API requires.

The focus text of the compactions of the sessions they wrote in, or sent anything to, is cleared
too: a compaction does not record who asked (``/compact <focus>``), and a focus is only a hint. So
is the bot's own ``/compact`` confirmation's quote of it in those sessions' outbox rows (the rest of
that reply stays, as every reply of the bot does).

Then the bytes go (after the commit, see :func:`reclaim`): SQLite runs with ``secure_delete``, so
deleted rows are zeroed; the search index is merged (old segments still hold the words) and the WAL
checkpointed and truncated. PostgreSQL only marks deleted rows dead, and VACUUM leaves their bytes
in the page: the touched tables are rewritten with VACUUM FULL (docs/security.md: measurements).
VACUUM FULL still copies a row that a snapshot older than its deletion could read, so the rewrite
first waits (bounded) for every such transaction of the database to end.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, func, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from agent.clock import utcnow
from agent.prompts import format_handoff
from agent.types import ChatMessage, content_text, text_block
from gateway.store.base import Repo, bump_view, chunks
from gateway.store.convert import stored_content
from gateway.store.db import Database
from gateway.store.message_ops import row_values
from gateway.store.models import compactions, inbox, memories, messages, outbox, scheduled_tasks, sessions
from gateway.store.task_ops import RUN_PREFIX
from gateway.wire import ERASED_FOCUS_QUOTE, FOCUS_QUOTE

_log = logging.getLogger(__name__)

ERASED_NOTICE = "(Earlier messages of this conversation were erased at a user's request.)"


def redacted_summary(compaction_id: str, at: datetime) -> str:
    """The text a redacted summary keeps: why, and how to read what remains."""
    recall = json.dumps({"compaction_id": compaction_id})
    return format_handoff(
        "## Redacted\n"
        f"- This summary was withdrawn on {at:%Y-%m-%d}: it was made from messages that were erased at "
        f"a user's request. The other messages it covered are still archived verbatim: recall {recall}."
    )


@dataclass(frozen=True, slots=True)
class EraseCounts:
    """What an erasure removes or changes (or would, for a preview)."""

    messages: int = 0
    sessions: int = 0
    summaries_redacted: int = 0
    inbox: int = 0
    memories: int = 0
    tasks: int = 0
    notices: int = 0
    focus_texts: int = 0
    focus_quotes: int = 0
    """The bot's /compact confirmations whose quote of a focus text is redacted."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Plan:
    victims: list[int]
    sessions: list[str]
    summaries: list[tuple[int, str]]  # (message id, compaction that produced it)
    inbox: list[int]
    scopes: list[str]
    memories: int
    tasks: list[str]
    focus: list[str]  # compactions whose focus text goes
    quotes: list[int]  # outbox rows (the bot's /compact confirmations) quoting a focus text

    def counts(self, notices: int = 0) -> EraseCounts:
        return EraseCounts(
            focus_texts=len(self.focus),
            focus_quotes=len(self.quotes),
            messages=len(self.victims),
            sessions=len(self.sessions),
            summaries_redacted=len(self.summaries),
            inbox=len(self.inbox),
            memories=self.memories,
            tasks=len(self.tasks),
            notices=notices,
        )


async def _tainted_summaries(
    s: AsyncSession, session_ids: Sequence[str], victims: Sequence[Any]
) -> list[tuple[int, str]]:
    """Summaries made (directly or through an earlier summary) from a victim: (id, producer)."""
    by_session: dict[str, list[Any]] = defaultdict(list)
    for v in victims:
        by_session[v.session_id].append(v)
    out: list[tuple[int, str]] = []
    for part in chunks(list(session_ids)):
        rows = (
            await s.execute(
                select(compactions).where(compactions.c.session_id.in_(part)).order_by(compactions.c.number)
            )
        ).mappings()
        plan = list(rows)
        ids = [c["id"] for c in plan]
        products: list[Any] = []
        for ids_part in chunks(ids):
            products += (
                await s.execute(
                    select(messages.c.id, messages.c.produced_by, messages.c.compaction_id).where(
                        messages.c.produced_by.in_(ids_part), messages.c.kind == "summary"
                    )
                )
            ).all()
        tainted: set[str] = set()
        for c in plan:  # in order: a later compaction inherits from the summaries it archived
            mine = by_session[c["session_id"]]
            hit = any(v.compaction_id == c["id"] for v in mine)
            if not hit and c["restored_at"] is not None and c["archived_from_seq"] is not None:
                # An undone compaction no longer marks its rows; its range still says what it read.
                hit = any(c["archived_from_seq"] <= v.seq <= c["archived_to_seq"] for v in mine)
            if not hit:
                hit = any(p.compaction_id == c["id"] and p.produced_by in tainted for p in products)
            if hit:
                tainted.add(c["id"])
        out += [(int(p.id), str(p.produced_by)) for p in products if p.produced_by in tainted]
    return out


async def _plan(s: AsyncSession, platform: str, user_id: str) -> _Plan:
    own_dms = select(sessions.c.key).where(
        sessions.c.platform == platform, sessions.c.user_id == user_id, sessions.c.key.contains(":dm:")
    )
    scopes = sorted(set((await s.scalars(own_dms)).all()))
    tasks: list[str] = []
    for part in chunks(scopes):
        tasks += (
            await s.scalars(select(scheduled_tasks.c.id).where(scheduled_tasks.c.session_key.in_(part)))
        ).all()
    # A task's run speaks with the task's words (the user's), as author ``task:<id>``.
    run_authors = [f"{RUN_PREFIX}{t}" for t in tasks]
    authored = messages.c.author_id == user_id
    if run_authors:
        authored = or_(authored, messages.c.author_id.in_(run_authors))
    victims = (
        await s.execute(
            select(messages.c.id, messages.c.session_id, messages.c.seq, messages.c.compaction_id)
            .join(sessions, sessions.c.id == messages.c.session_id)
            .where(authored, sessions.c.platform == platform)
        )
    ).all()
    session_ids = sorted({v.session_id for v in victims})
    summaries = await _tainted_summaries(s, session_ids, victims)
    victim_ids = [int(v.id) for v in victims]
    sent_by = inbox.c.payload["user_id"].as_string() == user_id
    if run_authors:
        sent_by = or_(
            sent_by,
            and_(inbox.c.session_key.in_(scopes), inbox.c.payload["user_id"].as_string().in_(run_authors)),
        )
    inbox_ids = list((await s.scalars(select(inbox.c.id).where(inbox.c.platform == platform, sent_by))).all())
    count = 0
    for part in chunks(scopes):
        count += int(
            await s.scalar(select(func.count()).select_from(memories).where(memories.c.scope.in_(part))) or 0
        )
    keys = set(scopes)
    for ids_part in chunks(inbox_ids):
        keys.update((await s.scalars(select(inbox.c.session_key).where(inbox.c.id.in_(ids_part)))).all())
    focused = await _focused(s, session_ids, sorted(keys))
    quotes = await _quoting(s, sorted({session_id for _, session_id in focused}))
    return _Plan(
        victim_ids,
        session_ids,
        summaries,
        [int(i) for i in inbox_ids],
        scopes,
        count,
        tasks,
        sorted({compaction_id for compaction_id, _ in focused}),
        quotes,
    )


async def _focused(s: AsyncSession, session_ids: Sequence[str], keys: Sequence[str]) -> list[tuple[str, str]]:
    """Compactions with a focus text in the sessions the user wrote in or sent to (by id or key):
    (compaction, its session)."""
    found: set[tuple[str, str]] = set()
    for part in chunks(list(session_ids)):
        rows = await s.execute(
            select(compactions.c.id, compactions.c.session_id).where(
                compactions.c.session_id.in_(part), compactions.c.focus.is_not(None)
            )
        )
        found.update((str(r.id), str(r.session_id)) for r in rows)
    for part in chunks(list(keys)):
        rows = await s.execute(
            select(compactions.c.id, compactions.c.session_id)
            .join(sessions, sessions.c.id == compactions.c.session_id)
            .where(sessions.c.key.in_(part), compactions.c.focus.is_not(None))
        )
        found.update((str(r.id), str(r.session_id)) for r in rows)
    return sorted(found)


async def _quoting(s: AsyncSession, session_ids: Sequence[str]) -> list[int]:
    """The outbox rows of ``session_ids`` whose text quotes a /compact focus."""
    found: list[int] = []
    for part in chunks(list(session_ids)):
        rows = await s.execute(
            select(outbox.c.id, outbox.c.text).where(
                outbox.c.session_id.in_(part), outbox.c.text.contains(", focused on “")
            )
        )
        found += [int(r.id) for r in rows if FOCUS_QUOTE.search(r.text)]
    return sorted(found)


async def _open_with_user_turn(s: AsyncSession, session_id: str) -> bool:
    """When the active view now starts with the assistant, put a notice before it; True if one was."""
    first = (
        await s.execute(
            select(messages.c.role, messages.c.seq, messages.c.sub_seq)
            .where(messages.c.session_id == session_id, messages.c.active)
            .order_by(messages.c.seq, messages.c.sub_seq)
            .limit(1)
        )
    ).first()
    if first is None or first.role == "user":
        return False
    lowest = await s.scalar(
        select(func.min(messages.c.sub_seq)).where(
            messages.c.session_id == session_id, messages.c.seq == first.seq
        )
    )
    notice = ChatMessage.user(ERASED_NOTICE, kind="notice", created_at=utcnow())
    await s.execute(
        messages.insert().values(
            **row_values(session_id, notice), seq=first.seq, sub_seq=int(lowest or 0) - 1
        )
    )
    return True


class EraseOps(Repo):
    async def erase_preview(self, platform: str, user_id: str) -> EraseCounts:
        """What :meth:`erase_user` would remove, changing nothing."""
        async with self._tx(write=False) as s:
            return (await _plan(s, platform, user_id)).counts()

    async def erase_user(self, platform: str, user_id: str) -> EraseCounts:
        """Erase everything the platform user wrote (see the module docstring); the counts."""
        now = utcnow()
        async with self._tx() as s:
            plan = await _plan(s, platform, user_id)
            for part in chunks(plan.victims):
                await s.execute(delete(messages).where(messages.c.id.in_(part)))
            for summary_id, producer in plan.summaries:
                content = [text_block(redacted_summary(producer, now))]
                plain = content_text(content)
                await s.execute(
                    update(messages)
                    .where(messages.c.id == summary_id)
                    .values(
                        content=stored_content(content, plain),
                        text=plain,
                        original_content=None,
                        edited_at=now,
                    )
                )
            for part in chunks(plan.inbox):
                await s.execute(delete(inbox).where(inbox.c.id.in_(part)))
            for scopes in chunks(plan.scopes):
                await s.execute(delete(memories).where(memories.c.scope.in_(scopes)))
            for task_ids in chunks(plan.tasks):
                await s.execute(delete(scheduled_tasks).where(scheduled_tasks.c.id.in_(task_ids)))
            for focused in chunks(plan.focus):
                await s.execute(update(compactions).where(compactions.c.id.in_(focused)).values(focus=None))
            for quoting in chunks(plan.quotes):
                rows = await s.execute(select(outbox.c.id, outbox.c.text).where(outbox.c.id.in_(quoting)))
                for row in rows.all():
                    redacted = FOCUS_QUOTE.sub(ERASED_FOCUS_QUOTE, row.text)
                    await s.execute(update(outbox).where(outbox.c.id == row.id).values(text=redacted))
            notices = 0
            for session_id in plan.sessions:
                notices += await _open_with_user_turn(s, session_id)
            await bump_view(s, *plan.sessions)
            xid = (
                await s.scalar(text("SELECT CAST(pg_current_xact_id() AS text)"))
                if self._db.dialect != "sqlite"
                else None
            )
        self._views.drop(*plan.sessions)
        if plan.victims or plan.inbox or plan.memories or plan.tasks or plan.focus or plan.quotes:
            await reclaim(self._db, after_xid=xid)
        return plan.counts(notices)

    async def turn_in_progress(self, session_key: str) -> bool:
        """True while a worker holds a live lease on an inbox item of the session (a turn is running)."""
        stmt = select(func.count()).where(
            inbox.c.session_key == session_key,
            inbox.c.status == "processing",
            or_(inbox.c.lease_until.is_(None), inbox.c.lease_until > self.lease_clock()),
        )
        async with self._tx(write=False) as s:
            return bool(await s.scalar(stmt))

    async def keys_written_by(self, platform: str, user_id: str) -> list[str]:
        """The keys of the sessions the platform user wrote in."""
        stmt = (
            select(sessions.c.key)
            .join(messages, messages.c.session_id == sessions.c.id)
            .where(messages.c.author_id == user_id, sessions.c.platform == platform)
            .distinct()
        )
        async with self._tx(write=False) as s:
            return sorted((await s.scalars(stmt)).all())


FTS_TABLES = ("messages_fts", "messages_fts_trgm")
"""SQLite's search indexes: their merged-away segments still hold the words of deleted rows."""
RECLAIMED_TABLES = ("messages", "inbox", "memories", "scheduled_tasks", "compactions", "outbox")
"""The tables an erasure deletes from or rewrites, whose dead bytes must go."""


SNAPSHOT_WAIT_SECONDS = 30.0
"""How long a PostgreSQL erasure waits for older transactions before it rewrites the tables anyway."""

_OLDER_TRANSACTIONS = text(
    """
    SELECT count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
      AND ((backend_xmin IS NOT NULL AND age(backend_xmin) >= age(xid(CAST(:xid AS xid8))))
        OR (backend_xid IS NOT NULL AND age(backend_xid) >= age(xid(CAST(:xid AS xid8)))))
    """
)


async def _wait_for_older_transactions(conn: AsyncConnection, xid: str, within: float) -> int:
    """Wait until no other transaction could still read rows deleted by ``xid``; how many still could."""
    deadline = time.monotonic() + within
    pause = 0.02
    while True:
        older = int(await conn.scalar(_OLDER_TRANSACTIONS, {"xid": xid}) or 0)
        if older == 0 or time.monotonic() >= deadline:
            return older
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)


async def reclaim(db: Database, after_xid: str | None = None, wait: float = SNAPSHOT_WAIT_SECONDS) -> None:
    """Make what an erasure deleted unreadable in the database's files (see the module docstring).

    ``after_xid`` is the erasing transaction's id on PostgreSQL: the rewrite waits up to ``wait``
    seconds for the transactions whose snapshots still see the deleted rows.
    """
    started = time.perf_counter()
    if db.dialect == "sqlite":

        def merge(conn: Connection) -> None:
            for table in FTS_TABLES:
                conn.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES ('optimize')")

        await db.write_at_once(merge)
        await db.truncate_log()
    else:
        async with db.engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            if after_xid is not None and (older := await _wait_for_older_transactions(conn, after_xid, wait)):
                _log.warning(
                    "erasure: %d transaction(s) older than the erasure still open after %.0f s; their "
                    "snapshots keep the deleted rows in the rewritten tables until the next VACUUM FULL",
                    older,
                    wait,
                )
            for table in RECLAIMED_TABLES:
                await conn.exec_driver_sql(f"VACUUM (FULL, ANALYZE) {table}")
    _log.info("erasure: deleted bytes reclaimed in %.0f ms", (time.perf_counter() - started) * 1000)
