"""Reads of the cache diagnostics kept with each chat call's usage (0018_cache_diagnostics)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from gateway.store.base import Repo
from gateway.store.models import usage

MissLabels = tuple[str, str, bool]
"""``(reason, cause, ours)``: the labels a miss is counted under."""


@dataclass(frozen=True, slots=True)
class CacheMissRow:
    """One chat call whose cache prefix missed, and why."""

    at: datetime
    reason: str
    cause: str
    ours: bool
    missed_tokens: int | None


class CacheOps(Repo):
    async def cache_misses(self) -> dict[MissLabels, int]:
        """Every recorded miss, counted by reason, our cause and whether it was ours."""
        u = usage.c
        stmt = (
            select(u.cache_miss_reason, u.cache_cause, u.cache_miss_ours, func.count())
            .where(u.cache_miss_reason.is_not(None))
            .group_by(u.cache_miss_reason, u.cache_cause, u.cache_miss_ours)
        )
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt)).all()
        counts: dict[MissLabels, int] = {}
        for reason, cause, ours, n in rows:
            key = (str(reason), str(cause or "none"), bool(ours))
            counts[key] = counts.get(key, 0) + int(n)
        return counts

    async def session_cache_misses(self, session_id: str, *, limit: int = 5) -> list[CacheMissRow]:
        """The session's latest misses, newest first."""
        u = usage.c
        stmt = (
            select(u.created_at, u.cache_miss_reason, u.cache_cause, u.cache_miss_ours, u.cache_missed_tokens)
            .where(u.session_id == session_id, u.cache_miss_reason.is_not(None))
            .order_by(u.created_at.desc(), u.id.desc())
            .limit(max(limit, 0))
        )
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt)).all()
        return [
            CacheMissRow(at=at, reason=str(r), cause=str(c or "none"), ours=bool(o), missed_tokens=m)
            for at, r, c, o, m in rows
        ]
