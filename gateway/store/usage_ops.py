"""Per-call token usage and cost, and the audit trail."""

from __future__ import annotations

from sqlalchemy import func, insert, select

from agent.types import UsageRecord
from gateway.store.base import Repo
from gateway.store.columns import clean_text, utcnow
from gateway.store.models import audit, usage
from gateway.store.records import UsageSummary


class UsageOps(Repo):
    async def record_usage(self, session_id: str, record: UsageRecord) -> None:
        async with self._tx() as s:
            await s.execute(
                insert(usage).values(
                    session_id=session_id,
                    model=record.model,
                    purpose=record.purpose,
                    input_tokens=record.usage.input_tokens,
                    cache_write_tokens=record.usage.cache_creation_input_tokens,
                    cache_read_tokens=record.usage.cache_read_input_tokens,
                    output_tokens=record.usage.output_tokens,
                    cost_usd=record.cost_usd,
                    estimated=record.estimated,
                    created_at=utcnow(),
                )
            )

    async def usage_summary(self, session_id: str) -> UsageSummary:
        stmt = select(
            func.count(),
            func.coalesce(func.sum(usage.c.input_tokens), 0),
            func.coalesce(func.sum(usage.c.cache_write_tokens), 0),
            func.coalesce(func.sum(usage.c.cache_read_tokens), 0),
            func.coalesce(func.sum(usage.c.output_tokens), 0),
            func.coalesce(func.sum(usage.c.cost_usd), 0.0),
        ).where(usage.c.session_id == session_id)
        async with self._tx(write=False) as s:
            calls, inp, cw, cr, out, cost = (await s.execute(stmt)).one()
        return UsageSummary(
            calls=int(calls),
            input=int(inp),
            cache_write=int(cw),
            cache_read=int(cr),
            output=int(out),
            cost_usd=float(cost),
        )

    async def audit(self, event: str, *, platform: str | None, user_id: str | None, detail: str = "") -> None:
        async with self._tx() as s:
            await s.execute(
                insert(audit).values(
                    event=event,
                    platform=platform,
                    user_id=user_id,
                    detail=clean_text(detail),
                    created_at=utcnow(),
                )
            )
