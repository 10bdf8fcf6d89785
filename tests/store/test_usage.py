"""Usage accounting per API call, and the audit trail."""

from __future__ import annotations

from sqlalchemy import select

from agent.types import Usage, UsageRecord
from gateway.store.models import audit
from gateway.store.records import UsageSummary
from gateway.store.repository import Store
from tests.store.helpers import new_session


async def test_usage_summary_adds_up_calls(store: Store) -> None:
    sid = await new_session(store)
    assert await store.usage_summary(sid) == UsageSummary()
    await store.record_usage(sid, UsageRecord("m", "chat", Usage(100, 20, 300, 4000), 0.5))
    await store.record_usage(sid, UsageRecord("h", "summary", Usage(10, 2, 0, 0), 0.25, estimated=True))
    assert await store.usage_summary(sid) == UsageSummary(
        calls=2, input=110, cache_write=300, cache_read=4000, output=22, cost_usd=0.75
    )


async def test_audit_rows_are_written(store: Store) -> None:
    await store.audit("restore", platform="telegram", user_id="42", detail="session abc")
    async with store.db.transaction(write=False) as s:
        row = (await s.execute(select(audit))).mappings().one()
    assert (row["event"], row["platform"], row["user_id"], row["detail"]) == (
        "restore",
        "telegram",
        "42",
        "session abc",
    )
    assert row["created_at"].tzinfo is not None
