"""The HTML routes: ``/`` (sessions), ``/sessions/{id}``, ``/search``; actions live in views_actions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from agent.types import SearchFilters
from gateway.admin import page, page_session, page_usage
from gateway.admin.api import (
    SEARCH_SORTS,
    Filter,
    Limit,
    Offset,
    Order,
    Sort,
    State,
    checked_id,
    session_query,
)
from gateway.admin.charts import context_chart
from gateway.admin.errors import BadRequest, utc_time
from gateway.admin.sub_agents import sub_agent_runs
from gateway.admin.tool_calls import tool_calls_table
from gateway.store.find_ops import SessionSort
from gateway.store.repository import Store
from gateway.store.usage_ops import GroupBy

TRANSCRIPT_PAGE = 200
CHART_CALLS = 1000
"""The session page's chart draws the latest this many calls (760 pixels wide: more would not show)."""
# No script runs on these pages, ever: even an escaping bug could not execute one.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
FormTime = Annotated[str | None, Query(max_length=64)]
USAGE_GROUPS: tuple[tuple[GroupBy, int], ...] = (("day", 366), ("platform", 50), ("session", 20))
"""The usage page's groupings and how many rows of each it shows."""


def html(body: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


def form_time(value: str | None, name: str) -> datetime | None:
    """A time from a form field: empty is none; ``2026-11-02``, ``2026-11-02T10:00`` (UTC), or with
    an offset."""
    if value is None or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise BadRequest(f"{name}: not a date or time: {value[:40]!r}") from None
    return utc_time(parsed, name)


def page_router(store: Store) -> APIRouter:
    """The page routes over ``store`` (same auth as the API: see gateway.admin.middleware)."""
    router = APIRouter(default_response_class=HTMLResponse)

    @router.get("/")
    async def sessions(
        platform: Filter = None,
        chat: Filter = None,
        user: Filter = None,
        key: Filter = None,
        since: FormTime = None,
        sort: SessionSort = "activity",
        order: Order = "desc",
        offset: Offset = 0,
        limit: Limit = 50,
        active_only: bool = False,
    ) -> HTMLResponse:
        when = form_time(since, "since")
        query = session_query(platform, chat, user, key, when, sort, order, active_only)
        rows, total = await store.find_sessions(query, limit=limit, offset=offset)
        params: dict[str, object] = {
            "platform": platform,
            "chat": chat,
            "user": user,
            "key": key,
            "since": since,
            "active_only": active_only,
        }
        return html(
            page.sessions_page(
                rows, total=total, params=params, sort=sort, order=order, offset=offset, limit=limit
            )
        )

    @router.get("/sessions/{session_id}")
    async def session(
        session_id: str,
        offset: Annotated[int | None, Query(ge=0, le=1_000_000_000)] = None,
        message: Annotated[int | None, Query(ge=0, le=2**62)] = None,
        done: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    ) -> HTMLResponse:
        info = await store.get_session(checked_id(session_id))
        if offset is None:
            if message is not None:  # the page that holds this message (a link from search)
                position = await store.message_position(info.id, message)
                offset = position - position % TRANSCRIPT_PAGE
            else:  # the latest messages
                total = (await store.messages_page(info.id, limit=0)).total
                offset = max(total - TRANSCRIPT_PAGE, 0)
        compactions = await store.list_compactions(info.id)
        entry = await store.get_audit(done) if done else None  # the action that led here
        chart = context_chart(await store.context_series(info.id, limit=CHART_CALLS), compactions)
        return html(
            page_session.session_page(
                info,
                counts=await store.message_counts(info.id),
                usage=await store.usage_report("day", session_id=info.id, limit=366),
                compactions=compactions,
                chart=chart,
                runs=await store.session_strategy_runs(info.id),
                tools=tool_calls_table(await store.session_tool_calls(info.id))
                + sub_agent_runs(
                    info, [await store.get_session(i) for i in await store.delegations(info.id)]
                ),
                refusals=await store.session_refusals(info.id),
                misses=await store.session_cache_misses(info.id),
                page=await store.messages_page(info.id, offset=offset, limit=TRANSCRIPT_PAGE),
                limit=TRANSCRIPT_PAGE,
                target=message,
                notice=entry.detail if entry and entry.session_id == info.id else "",
            )
        )

    @router.get("/search")
    async def search(
        q: Annotated[str, Query(max_length=100_000)] = "",
        state: State = "all",
        sort: Sort = "relevance",
        platform: Filter = None,
        chat: Filter = None,
        session: Filter = None,
        user: Filter = None,
        since: FormTime = None,
        until: FormTime = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> HTMLResponse:
        filters = SearchFilters(
            platform=platform or None,
            chat_id=chat or None,
            session_id=session or None,
            user_id=user or None,
            since=form_time(since, "since"),
            until=form_time(until, "until"),
            state=state,
        )
        # One more than shown: whether a next page exists, without counting every match.
        found = await store.search(q, filters, limit=limit + 1, offset=offset, sort=sort)
        hits = found[:limit]
        labels = await store.session_labels([h.session_id for h in hits])
        params: dict[str, object] = {
            "state": state,
            "sort": sort,
            "platform": platform,
            "chat": chat,
            "session": session,
            "user": user,
            "since": since,
            "until": until,
        }
        return html(
            page.search_page(
                q,
                hits,
                labels,
                params=params,
                sorts=SEARCH_SORTS,
                offset=offset,
                limit=limit,
                has_more=len(found) > limit,
            )
        )

    return router


def usage_router(store: Store) -> APIRouter:
    """``/usage``: the cost overview page."""
    router = APIRouter(default_response_class=HTMLResponse)

    @router.get("/usage")
    async def usage(since: FormTime = None, until: FormTime = None, platform: Filter = None) -> HTMLResponse:
        start, end = form_time(since, "since"), form_time(until, "until")
        reports = [
            await store.usage_report(group, since=start, until=end, platform=platform or None, limit=limit)
            for group, limit in USAGE_GROUPS
        ]
        days, platforms, top = reports
        params: dict[str, object] = {"since": since, "until": until, "platform": platform}
        return html(page_usage.usage_page(days, platforms, top, params=params))

    return router
