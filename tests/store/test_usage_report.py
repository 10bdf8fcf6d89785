"""The daily usage roll-up and the cost report built on it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select

from agent.types import Usage, UsageRecord
from gateway.store.models import usage, usage_daily
from gateway.store.repository import Store
from tests.store.helpers import new_session

DAY1 = datetime(2026, 11, 1, 23, 59, tzinfo=UTC)
DAY2 = datetime(2026, 11, 2, 0, 1, tzinfo=UTC)


async def call(
    store: Store, sid: str, at: datetime, *, inp: int, cw: int, cr: int, out: int, cost: float
) -> None:
    await store.record_usage(sid, UsageRecord("m", "chat", Usage(inp, out, cw, cr), cost), at=at)


async def test_each_call_lands_in_its_utc_day_and_the_rollup_matches_the_calls(store: Store) -> None:
    sid = await new_session(store)
    await call(store, sid, DAY1, inp=10, cw=100, cr=0, out=5, cost=0.5)
    await call(store, sid, DAY1, inp=20, cw=0, cr=300, out=7, cost=0.25)
    await call(store, sid, DAY2, inp=1, cw=2, cr=3, out=4, cost=1.0)
    report = await store.usage_report("day")
    assert [(r.key, r.calls, r.input, r.cache_write, r.cache_read, r.output) for r in report.rows] == [
        ("2026-11-01", 2, 30, 100, 300, 12),
        ("2026-11-02", 1, 1, 2, 3, 4),
    ]
    assert report.totals.cost_usd == 1.75 and report.groups == 2
    async with store.db.transaction(write=False) as s:
        per_call = (await s.execute(select(func.sum(usage.c.cost_usd), func.count()))).one()
        rolled = (
            await s.execute(select(func.sum(usage_daily.c.cost_usd), func.sum(usage_daily.c.calls)))
        ).one()
    assert tuple(per_call) == tuple(rolled) == (1.75, 3)


async def test_the_cache_hit_ratio_is_reads_over_every_prompt_token(store: Store) -> None:
    sid = await new_session(store)
    await call(store, sid, DAY1, inp=100, cw=100, cr=800, out=1, cost=0.1)
    [row] = (await store.usage_report("session")).rows
    assert row.cache_hit_ratio == 0.8 and row.prompt == 1000


async def test_sessions_and_platforms_come_costliest_first_and_filters_apply(store: Store) -> None:
    cheap = await new_session(store, "telegram:1", platform="telegram")
    dear = await new_session(store, "discord:2", platform="discord", chat_id="2")
    await call(store, cheap, DAY1, inp=1, cw=0, cr=0, out=1, cost=0.1)
    await call(store, dear, DAY2, inp=1, cw=0, cr=0, out=1, cost=2.0)
    by_session = await store.usage_report("session")
    assert [(r.key, r.label) for r in by_session.rows] == [
        (dear, "discord:2 (discord)"),
        (cheap, "telegram:1 (telegram)"),
    ]
    assert [r.key for r in (await store.usage_report("platform")).rows] == ["discord", "telegram"]
    only_day1 = await store.usage_report("platform", until=DAY1)
    assert [r.key for r in only_day1.rows] == ["telegram"]
    assert [r.key for r in (await store.usage_report("day", platform="discord")).rows] == ["2026-11-02"]
    assert (await store.usage_report("day", session_id=cheap, since=DAY2)).rows == []


async def test_the_report_pages_and_counts_every_group(store: Store) -> None:
    sid = await new_session(store)
    for day in range(1, 6):
        await call(store, sid, datetime(2026, 10, day, tzinfo=UTC), inp=1, cw=0, cr=0, out=0, cost=0.0)
    page = await store.usage_report("day", limit=2, offset=2)
    assert [r.key for r in page.rows] == ["2026-10-03", "2026-10-04"] and page.groups == 5
