"""Compaction by soft archival, its undo, and its history.

The summary keeps its place in the active view through the order key: it is inserted
with its anchor's ``seq`` (the first archived message) and the next free ``sub_seq`` of
that seq, so ``ORDER BY seq, sub_seq`` puts it exactly where the archived range was,
after everything kept before it and before everything that follows, including messages
appended while the summarizer ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from agent.clock import utcnow
from agent.errors import NotFound, StoreError
from agent.types import CompactionPlan, CompactionRecord
from gateway.store.base import Repo, bump_view, chunks, unique
from gateway.store.columns import clean_json, clean_text
from gateway.store.convert import Row, to_compaction
from gateway.store.message_ops import row_values
from gateway.store.models import SessionRow, compactions, messages


class CompactionOps(Repo):
    async def archive_and_summarize(self, session_id: str, plan: CompactionPlan) -> CompactionRecord:
        """Apply ``plan`` in ONE transaction; an invalid plan raises StoreError and changes nothing."""
        try:
            async with self._tx() as s:
                record = await _apply(s, session_id, plan)
        except IntegrityError as exc:
            raise StoreError(f"compaction of session {session_id} failed: {exc.orig}") from exc
        finally:
            self._views.drop(session_id)
        return record

    async def restore_latest_compaction(self, session_id: str) -> CompactionRecord:
        """Undo the latest compaction not yet undone: its archived rows come back, its products retire."""
        async with self._tx() as s:
            await _lock_session(s, session_id)
            row = (
                (
                    await s.execute(
                        select(compactions)
                        .where(compactions.c.session_id == session_id, compactions.c.restored_at.is_(None))
                        .order_by(compactions.c.number.desc())
                        .limit(1)
                    )
                )
                .mappings()
                .first()
            )
            if row is None:
                raise NotFound(f"session {session_id} has no compaction to restore")
            cid, now = row["id"], utcnow()
            kept = await s.scalar(select(func.count()).where(messages.c.compaction_id == cid))
            if int(kept or 0) < int(row["messages_archived"]):
                # Retention deleted what it archived: undoing it would retire the summary that
                # is all that is left of them.
                raise NotFound(
                    f"the latest compaction of session {session_id} cannot be undone: "
                    "messages it archived were deleted (retention policy)"
                )
            await s.execute(
                update(messages)
                .where(messages.c.compaction_id == cid)
                .values(active=True, compacted=False, compaction_id=None)
            )
            await s.execute(update(messages).where(messages.c.produced_by == cid).values(active=False))
            await s.execute(update(compactions).where(compactions.c.id == cid).values(restored_at=now))
            await bump_view(s, session_id)
        self._views.drop(session_id)
        return replace(to_compaction(row), restored_at=now)

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]:
        stmt = (
            select(compactions).where(compactions.c.session_id == session_id).order_by(compactions.c.number)
        )
        async with self._tx(write=False) as s:
            return [to_compaction(r) for r in (await s.execute(stmt)).mappings()]


async def _lock_session(s: AsyncSession, session_id: str) -> SessionRow:
    """The session row, locked for this transaction (PostgreSQL; SQLite's BEGIN IMMEDIATE already is)."""
    row = await s.get(SessionRow, session_id, with_for_update=True)
    if row is None:
        raise NotFound(f"no session {session_id}")
    return row


async def _load_named(s: AsyncSession, ids: list[int]) -> dict[int, Row]:
    cols = (messages.c.id, messages.c.session_id, messages.c.seq, messages.c.active)
    found: dict[int, Row] = {}
    for part in chunks(ids):
        for r in (await s.execute(select(*cols).where(messages.c.id.in_(part)))).mappings():
            found[int(r["id"])] = r
    return found


def _validate(session_id: str, plan: CompactionPlan, named: Mapping[int, Row]) -> None:
    for mid in unique([*plan.archive_ids, *(i.anchor_id for i in plan.insertions)]):
        row = named.get(mid)
        if row is None or row["session_id"] != session_id:
            raise StoreError(f"compaction plan names message {mid}, which is not in session {session_id}")
        if not row["active"]:
            raise StoreError(f"compaction plan names message {mid}, which is not in the active view")
    for insertion in plan.insertions:
        if not insertion.message.content:
            raise StoreError("compaction plan inserts a message with no content")


async def _insert_products(
    s: AsyncSession, session_id: str, cid: str, plan: CompactionPlan, named: Mapping[int, Row]
) -> int | None:
    """Insert each planned message in its anchor's place; returns the first summary's id."""
    summary_id: int | None = None
    for insertion in plan.insertions:
        seq = int(named[insertion.anchor_id]["seq"])
        sub_seq = await s.scalar(
            select(func.max(messages.c.sub_seq) + 1).where(
                messages.c.session_id == session_id, messages.c.seq == seq
            )
        )
        # A product is a new row: a platform message id belongs to the original alone.
        message = replace(
            insertion.message, content=clean_json(insertion.message.content), platform_message_id=None
        )
        new_id = await s.scalar(
            insert(messages)
            .values(**row_values(session_id, message), seq=seq, sub_seq=sub_seq, produced_by=cid)
            .returning(messages.c.id)
        )
        if message.kind == "summary" and summary_id is None and new_id is not None:
            summary_id = int(new_id)
    return summary_id


async def _apply(s: AsyncSession, session_id: str, plan: CompactionPlan) -> CompactionRecord:
    session_row = await _lock_session(s, session_id)
    archive_ids = unique(plan.archive_ids)
    named = await _load_named(s, unique([*archive_ids, *(i.anchor_id for i in plan.insertions)]))
    _validate(session_id, plan, named)

    number = await s.scalar(
        select(func.coalesce(func.max(compactions.c.number), 0) + 1).where(
            compactions.c.session_id == session_id
        )
    )
    archived_seqs = [int(named[i]["seq"]) for i in archive_ids]
    values: dict[str, Any] = {
        "id": plan.compaction_id,
        "session_id": session_id,
        "number": number,
        "trigger": plan.trigger,
        "status": plan.status,
        "archived_from_seq": min(archived_seqs, default=None),
        "archived_to_seq": max(archived_seqs, default=None),
        "messages_archived": len(archive_ids),
        "first_kept_id": plan.first_kept_id,
        "summary_message_id": None,
        "tokens_before": plan.tokens_before,
        "tokens_after": plan.tokens_after,
        "model": plan.model,
        "duration_ms": plan.duration_ms,
        "focus": None if plan.focus is None else clean_text(plan.focus),
        "created_at": utcnow(),
        "restored_at": None,
        "strategy": plan.strategy,
    }
    cid = values["id"]
    await s.execute(insert(compactions).values(**values))

    for part in chunks(archive_ids):
        await s.execute(
            update(messages)
            .where(messages.c.id.in_(part))
            .values(active=False, compacted=True, compaction_id=cid)
        )

    values["summary_message_id"] = await _insert_products(s, session_id, cid, plan, named)
    if values["summary_message_id"] is not None:
        await s.execute(
            update(compactions)
            .where(compactions.c.id == cid)
            .values(summary_message_id=values["summary_message_id"])
        )
    session_row.compaction_count += 1
    await s.flush()
    await bump_view(s, session_id)
    return to_compaction(values)
