"""The HTML routes: ``/`` (sessions), ``/sessions/{id}``, ``/search``, and the restore button."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, RedirectResponse

from agent.types import SearchFilters
from gateway.admin import page
from gateway.admin.api import Filter, Limit, Offset, Sort, State, checked_id, restore_latest
from gateway.admin.charts import context_chart
from gateway.store.repository import Store

TRANSCRIPT_PAGE = 200
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


def html(body: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


def page_router(store: Store) -> APIRouter:
    """The page routes over ``store`` (same auth as the API: see gateway.admin.middleware)."""
    router = APIRouter(default_response_class=HTMLResponse)

    @router.get("/")
    async def sessions(
        platform: Filter = None, offset: Offset = 0, limit: Limit = 50, active_only: bool = False
    ) -> HTMLResponse:
        rows = await store.list_sessions(
            limit=limit, offset=offset, platform=platform, include_ended=not active_only
        )
        return html(
            page.sessions_page(rows, platform=platform, offset=offset, limit=limit, active_only=active_only)
        )

    @router.get("/sessions/{session_id}")
    async def session(
        session_id: str,
        offset: Annotated[int | None, Query(ge=0, le=1_000_000_000)] = None,
        message: Annotated[int | None, Query(ge=0, le=2**62)] = None,
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
        chart = context_chart(await store.context_series(info.id), compactions)
        return html(
            page.session_page(
                info,
                counts=await store.message_counts(info.id),
                usage=await store.usage_summary(info.id),
                compactions=compactions,
                chart=chart,
                page=await store.messages_page(info.id, offset=offset, limit=TRANSCRIPT_PAGE),
                limit=TRANSCRIPT_PAGE,
            )
        )

    @router.post("/sessions/{session_id}/restore")
    async def restore(session_id: str) -> RedirectResponse:
        await restore_latest(store, checked_id(session_id))
        return RedirectResponse(f"/sessions/{session_id}", status_code=303)

    @router.get("/search")
    async def search(
        q: Annotated[str, Query(max_length=100_000)] = "",
        state: State = "all",
        session: Filter = None,
        limit: Limit = 50,
        sort: Sort = "relevance",
    ) -> HTMLResponse:
        hits = await store.search(q, SearchFilters(session_id=session, state=state), limit=limit, sort=sort)
        return html(page.search_page(q, state, hits, sort=sort))

    return router
