"""Finding sessions for the admin: filters, sort orders, pages; and the labels search hits show.

A page is found in two steps, so the work grows with the page, not with the database: the
ids of the page (filtered, sorted, cut), then the counts and costs of those ids alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, false, func, select

from gateway.store.base import Repo, chunks
from gateway.store.convert import SESSION_FIELDS, to_session
from gateway.store.models import SessionRow, compactions, messages, sessions, usage_daily
from gateway.store.records import SessionInfo, SessionSummary

SessionSort = Literal["activity", "size", "cost", "compactions"]
SORTS: tuple[SessionSort, ...] = ("activity", "size", "cost", "compactions")


@dataclass(frozen=True, slots=True)
class SessionQuery:
    """Which sessions, in which order. ``None`` filters mean "any"; ``key`` is a substring."""

    platform: str | None = None
    chat_id: str | None = None
    user_id: str | None = None
    key: str | None = None
    active_since: datetime | None = None
    include_ended: bool = True
    sort: SessionSort = "activity"
    descending: bool = True


@dataclass(frozen=True, slots=True)
class SessionListing(SessionSummary):
    """A session row of the admin list: counts, context size (``last_prompt_tokens``) and cost."""

    cost_usd: float = 0.0
    calls: int = 0


@dataclass(frozen=True, slots=True)
class SessionLabel:
    key: str
    platform: str


def _conditions(q: SessionQuery) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if q.platform is not None:
        where.append(sessions.c.platform == q.platform)
    if q.chat_id is not None:
        where.append(sessions.c.chat_id == q.chat_id)
    if q.user_id is not None:
        # The session's own user (a DM), or anyone who wrote in it (a group).
        authored = select(messages.c.session_id).where(messages.c.author_id == q.user_id).distinct()
        where.append((sessions.c.user_id == q.user_id) | sessions.c.id.in_(authored))
    if q.key:
        where.append(func.lower(sessions.c.key).contains(q.key.lower(), autoescape=True))
    if q.active_since is not None:
        where.append(sessions.c.last_activity_at >= q.active_since)
    if not q.include_ended:
        where.append(sessions.c.ended_at.is_(None))
    return where


def _sort_key(q: SessionQuery) -> tuple[Any, ColumnElement[Any]]:
    """(the joined from-clause, the value to sort on) for the query's order."""
    if q.sort == "cost":
        cost = (
            select(usage_daily.c.session_id, func.sum(usage_daily.c.cost_usd).label("v"))
            .group_by(usage_daily.c.session_id)
            .subquery()
        )
        joined = sessions.outerjoin(cost, cost.c.session_id == sessions.c.id)
        return joined, func.coalesce(cost.c.v, 0.0)
    if q.sort == "compactions":
        count = (
            select(compactions.c.session_id, func.count().label("v"))
            .group_by(compactions.c.session_id)
            .subquery()
        )
        joined = sessions.outerjoin(count, count.c.session_id == sessions.c.id)
        return joined, func.coalesce(count.c.v, 0)
    if q.sort == "size":
        return sessions, func.coalesce(sessions.c.last_prompt_tokens, -1)
    return sessions, sessions.c.last_activity_at


class FindOps(Repo):
    async def sessions_by_prefix(self, prefix: str, *, limit: int = 10) -> tuple[list[SessionInfo], int]:
        """Up to ``limit`` sessions whose id starts with ``prefix`` (most recently active first), and
        how many there are in all: a short id, as ``hygieia sessions search`` prints, names one."""
        wanted = prefix.strip().lower()
        if not wanted:
            return [], 0
        where = sessions.c.id.startswith(wanted, autoescape=True)
        page = select(SessionRow).where(where).order_by(sessions.c.last_activity_at.desc()).limit(limit)
        async with self._tx(write=False) as s:
            rows = [to_session(r) for r in await s.scalars(page)]
            total = (
                len(rows)
                if len(rows) < limit
                else int(await s.scalar(select(func.count()).where(where)) or 0)
            )
        return rows, total

    async def find_sessions(
        self, query: SessionQuery, *, limit: int = 50, offset: int = 0
    ) -> tuple[list[SessionListing], int]:
        """One page of the sessions ``query`` selects, and how many it selects in all."""
        joined, value = _sort_key(query)
        where = _conditions(query)
        direction = value.desc() if query.descending else value.asc()
        page_ids = (
            select(sessions.c.id)
            .select_from(joined)
            .where(*where)
            .order_by(direction, sessions.c.last_activity_at.desc(), sessions.c.id)
            .limit(max(limit, 0))
            .offset(max(offset, 0))
        )
        async with self._tx(write=False) as s:
            ids = list((await s.scalars(page_ids)).all())
            total = int(await s.scalar(select(func.count()).select_from(sessions).where(*where)) or 0)
            if not ids:
                return [], total
            rows = {r.id: r for r in (await s.scalars(select(SessionRow).where(SessionRow.id.in_(ids))))}
            counts = await s.execute(
                select(messages.c.session_id, messages.c.active, messages.c.compacted, func.count())
                .where(messages.c.session_id.in_(ids))
                .group_by(messages.c.session_id, messages.c.active, messages.c.compacted)
            )
            # "archived" is what a compaction archived, as everywhere else (a summary retired by
            # a restore is neither active nor archived).
            by_state: dict[tuple[str, str], int] = {}
            for sid, is_active, is_compacted, n in counts:
                state = "active" if is_active else ("archived" if is_compacted else "retired")
                by_state[(sid, state)] = by_state.get((sid, state), 0) + int(n)
            daily = usage_daily.c
            costs = await s.execute(
                select(daily.session_id, func.sum(daily.cost_usd), func.sum(daily.calls))
                .where(usage_daily.c.session_id.in_(ids))
                .group_by(usage_daily.c.session_id)
            )
            cost = {sid: (float(c or 0.0), int(n or 0)) for sid, c, n in costs}
            done = await s.execute(
                select(compactions.c.session_id, func.count())
                .where(compactions.c.session_id.in_(ids))
                .group_by(compactions.c.session_id)
            )
            compacted = {sid: int(n) for sid, n in done}
        listing = [
            SessionListing(
                **{name: getattr(rows[i], name) for name in SESSION_FIELDS},
                active=by_state.get((i, "active"), 0),
                archived=by_state.get((i, "archived"), 0),
                compactions=compacted.get(i, 0),
                cost_usd=cost.get(i, (0.0, 0))[0],
                calls=cost.get(i, (0.0, 0))[1],
            )
            for i in ids
        ]
        return listing, total

    async def session_labels(self, session_ids: Sequence[str]) -> dict[str, SessionLabel]:
        """The key and platform of each session (for search hits); unknown ids are left out."""
        wanted = list(dict.fromkeys(session_ids))
        out: dict[str, SessionLabel] = {}
        async with self._tx(write=False) as s:
            for part in chunks(wanted):
                stmt = select(sessions.c.id, sessions.c.key, sessions.c.platform).where(
                    sessions.c.id.in_(part) if part else false()
                )
                for sid, key, platform in await s.execute(stmt):
                    out[sid] = SessionLabel(key=key, platform=platform)
        return out
