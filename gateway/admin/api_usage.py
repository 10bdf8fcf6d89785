"""``/api/usage``: tokens and cost per day, session or platform, with the cache hit ratio."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter

from gateway.admin.api import Filter, Limit, Offset, checked_id
from gateway.admin.errors import utc_time
from gateway.store.repository import Store
from gateway.store.usage_ops import GroupBy, UsageLine, UsageReport


def line_json(line: UsageLine) -> dict[str, Any]:
    return {
        "key": line.key,
        "label": line.label,
        "calls": line.calls,
        "input": line.input,
        "cache_write": line.cache_write,
        "cache_read": line.cache_read,
        "output": line.output,
        "cost_usd": round(line.cost_usd, 6),
        "cache_hit_ratio": round(line.cache_hit_ratio, 4),
        # The same figure under the name the cache diagnostics docs use (reads over all prompt tokens).
        "cache_read_share": round(line.cache_hit_ratio, 4),
    }


def report_json(report: UsageReport, offset: int) -> dict[str, Any]:
    end = offset + len(report.rows)
    return {
        "group_by": report.group_by,
        "groups": report.groups,
        "offset": offset,
        "next_offset": end if end < report.groups else None,
        "rows": [line_json(r) for r in report.rows],
        "totals": line_json(report.totals),
    }


def usage_router(store: Store) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/usage")
    async def usage(
        group_by: GroupBy = "day",
        since: datetime | None = None,
        until: datetime | None = None,
        platform: Filter = None,
        session: Filter = None,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Uncached input, cache writes, cache reads, output and cost per group (whole UTC days)."""
        report = await store.usage_report(
            group_by,
            since=utc_time(since, "since"),
            until=utc_time(until, "until"),
            platform=platform or None,
            session_id=checked_id(session) if session else None,
            limit=limit,
            offset=offset,
        )
        return report_json(report, offset)

    return router
