"""Per-call token usage and cost, its daily roll-up, the cost report, and the audit trail.

Every call is one ``usage`` row; the same transaction adds it to ``usage_daily`` (one row per
session and UTC day), which is what the cost views read: a report over months of calls reads
days, not calls.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, Connection, Insert, Select, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from agent.clock import utcnow
from agent.types import CacheCheck, ContextState, UsageRecord
from gateway.store.base import Repo
from gateway.store.columns import clean_text
from gateway.store.models import audit, sessions, usage, usage_daily
from gateway.store.records import UsageSummary
from gateway.store.session_ops import save_state_in, state_values

GroupBy = Literal["day", "session", "platform"]
_SUMMED = ("calls", "input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens", "cost_usd")


def day_of(at: datetime) -> str:
    """The UTC day an instant belongs to, as ``usage_daily.day`` keeps it."""
    return at.strftime("%Y-%m-%d")


@dataclass(frozen=True, slots=True)
class UsageLine:
    """Usage summed over one group (a day, a session or a platform)."""

    key: str
    calls: int = 0
    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    cost_usd: float = 0.0
    label: str | None = None
    """The session's key and platform when grouped by session."""

    @property
    def prompt(self) -> int:
        return self.input + self.cache_write + self.cache_read

    @property
    def cache_hit_ratio(self) -> float:
        """Cache reads over every prompt token: the main cost lever."""
        return self.cache_read / self.prompt if self.prompt else 0.0


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Rows of one grouping (one page of them), the number of groups, and the totals of every group."""

    group_by: GroupBy
    rows: list[UsageLine]
    groups: int
    totals: UsageLine


def _line(key: str, values: Any, label: str | None = None) -> UsageLine:
    calls, inp, cw, cr, out, cost = values
    return UsageLine(
        key=key,
        calls=int(calls or 0),
        input=int(inp or 0),
        cache_write=int(cw or 0),
        cache_read=int(cr or 0),
        output=int(out or 0),
        cost_usd=float(cost or 0.0),
        label=label,
    )


def _sums() -> list[ColumnElement[Any]]:
    return [func.coalesce(func.sum(usage_daily.c[name]), 0).label(name) for name in _SUMMED]


@functools.cache
def _usage_statements(dialect: str) -> tuple[Insert, Insert]:
    """The call's row and the upsert of its day's roll-up, built once (values bound per call)."""
    dialect_insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
    upsert = dialect_insert(usage_daily)
    add_to_day = upsert.on_conflict_do_update(
        index_elements=["session_id", "day"],
        set_={name: usage_daily.c[name] + upsert.excluded[name] for name in _SUMMED},
    )
    return insert(usage), add_to_day


UsageRows = tuple[dict[str, Any], dict[str, Any]]
"""One call's ``usage`` row and what it adds to its day's roll-up."""


def cache_columns(check: CacheCheck | None) -> dict[str, Any]:
    """A call's cache diagnostics as the ``usage`` row keeps them (NULLs: none were asked)."""
    if check is None:
        return {
            "cache_miss_reason": None,
            "cache_missed_tokens": None,
            "cache_cause": None,
            "cache_miss_ours": None,
        }
    return {
        "cache_miss_reason": check.reason,
        "cache_missed_tokens": check.missed_tokens,
        "cache_cause": check.cause,
        "cache_miss_ours": check.ours if check.reason is not None else None,
    }


def usage_rows(session_id: str, record: UsageRecord, at: datetime) -> UsageRows:
    """The parameters of :func:`record_usage_in` (built on the event loop, not in the thread)."""
    u = record.usage
    tokens = {
        "input_tokens": u.input_tokens,
        "cache_write_tokens": u.cache_creation_input_tokens,
        "cache_read_tokens": u.cache_read_input_tokens,
        "output_tokens": u.output_tokens,
        "cost_usd": record.cost_usd,
    }
    call = {
        "session_id": session_id,
        "model": record.model,
        "purpose": record.purpose,
        **tokens,
        "estimated": record.estimated,
        "created_at": at,
        **cache_columns(record.cache),
    }
    return call, {"session_id": session_id, "day": day_of(at), "calls": 1, **tokens}


def record_usage_in(conn: Connection, dialect: str, rows: UsageRows) -> None:
    """Store one call's usage and add it to its day's roll-up, inside ``conn``'s transaction."""
    add_call, add_to_day = _usage_statements(dialect)
    conn.execute(add_call, rows[0])
    conn.execute(add_to_day, rows[1])


class UsageOps(Repo):
    async def record_usage(
        self,
        session_id: str,
        record: UsageRecord,
        *,
        state: ContextState | None = None,
        at: datetime | None = None,
    ) -> None:
        """Store one call's usage (``at`` defaults to now) and add it to its day's roll-up;
        with ``state``, the session's compression state is saved in the same transaction."""
        rows = usage_rows(session_id, record, at or utcnow())
        saved = None if state is None else state_values(session_id, state)
        dialect = self._db.dialect

        def write(conn: Connection) -> None:
            record_usage_in(conn, dialect, rows)
            if saved is not None:
                save_state_in(conn, saved)

        # One worker-thread call on SQLite: every model call records its usage.
        await self._db.write_at_once(write)

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

    async def usage_report(
        self,
        group_by: GroupBy,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        platform: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> UsageReport:
        """Usage per day (oldest first), per session or per platform (costliest first), paged.

        ``since``/``until`` select whole UTC days: the day of ``since`` through the day of ``until``.
        """
        where: list[ColumnElement[bool]] = []
        if since is not None:
            where.append(usage_daily.c.day >= day_of(since))
        if until is not None:
            where.append(usage_daily.c.day <= day_of(until))
        if session_id is not None:
            where.append(usage_daily.c.session_id == session_id)
        if platform is not None:
            where.append(sessions.c.platform == platform)
        joined = usage_daily.join(sessions, sessions.c.id == usage_daily.c.session_id)
        group: Sequence[ColumnElement[Any]] = {
            "day": [usage_daily.c.day],
            "session": [usage_daily.c.session_id, sessions.c.key, sessions.c.platform],
            "platform": [sessions.c.platform],
        }[group_by]
        grouped: Select[Any] = select(*group, *_sums()).select_from(joined).where(*where).group_by(*group)
        cost = func.sum(usage_daily.c.cost_usd)
        order = [group[0]] if group_by == "day" else [cost.desc(), group[0]]
        paged = grouped.order_by(*order).limit(max(limit, 0)).offset(max(offset, 0))
        async with self._tx(write=False) as s:
            rows = (await s.execute(paged)).all()
            groups = int(await s.scalar(select(func.count()).select_from(grouped.subquery())) or 0)
            totals = (await s.execute(select(*_sums()).select_from(joined).where(*where))).one()
        width = len(group)
        lines = [
            _line(str(r[0]), r[width:], f"{r[1]} ({r[2]})" if group_by == "session" else None) for r in rows
        ]
        return UsageReport(group_by=group_by, rows=lines, groups=groups, totals=_line("total", totals))

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
