"""The admin audit trail: who did what, when, to which session or user, and what it changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select

from agent.clock import utcnow
from gateway.store.base import Repo
from gateway.store.columns import clean_json, clean_text
from gateway.store.models import audit


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    event: str
    created_at: datetime
    actor: str | None
    session_id: str | None
    platform: str | None
    user_id: str | None
    detail: str
    counts: dict[str, Any] = field(default_factory=dict)


def _entry(row: Any) -> AuditEntry:
    return AuditEntry(
        id=int(row["id"]),
        event=row["event"],
        created_at=row["created_at"],
        actor=row["actor"],
        session_id=row["session_id"],
        platform=row["platform"],
        user_id=row["user_id"],
        detail=row["detail"] or "",
        counts=dict(row["counts"] or {}),
    )


class AuditOps(Repo):
    async def record_action(
        self,
        event: str,
        *,
        actor: str,
        session_id: str | None = None,
        platform: str | None = None,
        user_id: str | None = None,
        detail: str = "",
        counts: dict[str, Any] | None = None,
    ) -> AuditEntry:
        """Write one audit row for an admin action and return it."""
        values = {
            "event": event,
            "actor": clean_text(actor)[:255],
            "session_id": session_id,
            "platform": platform,
            "user_id": user_id,
            "detail": clean_text(detail),
            "counts": clean_json(counts or {}),
            "created_at": utcnow(),
        }
        async with self._tx() as s:
            new_id = await s.scalar(insert(audit).values(**values).returning(audit.c.id))
        return _entry({**values, "id": new_id})

    async def get_audit(self, entry_id: int) -> AuditEntry | None:
        async with self._tx(write=False) as s:
            row = (await s.execute(select(audit).where(audit.c.id == entry_id))).mappings().first()
        return None if row is None else _entry(row)

    async def list_audit(
        self, *, limit: int = 50, offset: int = 0, event: str | None = None
    ) -> tuple[list[AuditEntry], int]:
        """Audit rows, newest first, and how many there are (of ``event``, when given)."""
        where = [] if event is None else [audit.c.event == event]
        stmt = (
            select(audit)
            .where(*where)
            .order_by(audit.c.id.desc())
            .limit(max(limit, 0))
            .offset(max(offset, 0))
        )
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt)).mappings().all()
            total = int(await s.scalar(select(func.count()).select_from(audit).where(*where)) or 0)
        return [_entry(r) for r in rows], total
