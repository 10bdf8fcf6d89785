"""MCP tool calls: one row each (server, tool, duration, error; never the output), the session's
list for the admin page, and per-server totals for ``/metrics``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import case, func, insert, select

from agent.redact import redact
from agent.tools.calls import ToolCallRecord
from gateway.store.base import Repo
from gateway.store.columns import clean_text
from gateway.store.models import tool_calls

ERROR_CHARS = 500
LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0)
"""Upper bounds (seconds) of the latency histogram ``/metrics`` exports per server."""


@dataclass(frozen=True, slots=True)
class ServerCallTotals:
    """One server's calls ever made: how many, how many failed, their seconds, and how many took
    at most each bound of :data:`LATENCY_BUCKETS`."""

    calls: int
    errors: int
    seconds: float
    within: tuple[int, ...] = field(default_factory=tuple)


class ToolCallOps(Repo):
    async def record_tool_call(self, record: ToolCallRecord) -> None:
        """Keep one call (its error line redacted: a server may echo a credential)."""
        error = None if record.error is None else clean_text(redact(record.error)[:ERROR_CHARS])
        async with self._tx() as s:
            await s.execute(
                insert(tool_calls).values(
                    session_id=record.session_id,
                    server=record.server[:64],
                    tool=record.tool[:128],
                    started_at=record.started_at,
                    duration_ms=max(0.0, record.duration_ms),
                    error=error,
                    output_chars=max(0, record.output_chars),
                )
            )

    async def session_tool_calls(self, session_id: str, limit: int = 200) -> Sequence[ToolCallRecord]:
        """The session's latest calls, newest first."""
        async with self._tx(write=False) as s:
            rows = await s.execute(
                select(tool_calls)
                .where(tool_calls.c.session_id == session_id)
                .order_by(tool_calls.c.id.desc())
                .limit(limit)
            )
            return [
                ToolCallRecord(
                    r.session_id, r.server, r.tool, r.started_at, r.duration_ms, r.error, r.output_chars
                )
                for r in rows
            ]

    async def tool_call_totals(self) -> dict[str, ServerCallTotals]:
        """Per server, over every call kept."""
        c = tool_calls.c
        buckets = [func.sum(case((c.duration_ms <= bound * 1000, 1), else_=0)) for bound in LATENCY_BUCKETS]
        errors = func.sum(case((c.error.is_not(None), 1), else_=0))
        async with self._tx(write=False) as s:
            rows = await s.execute(
                select(c.server, func.count(), errors, func.sum(c.duration_ms), *buckets).group_by(c.server)
            )
            return {
                row[0]: ServerCallTotals(
                    int(row[1]),
                    int(row[2] or 0),
                    float(row[3] or 0) / 1000,
                    tuple(int(v or 0) for v in row[4:]),
                )
                for row in rows
            }
