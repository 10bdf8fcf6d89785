"""The overrides page's routes: ``GET /overrides``, and the posts that set and clear one (audited;
the browser lands back on the page with a one-line notice)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from gateway.admin.api_actions import actor
from gateway.admin.overrides import OverrideActions
from gateway.admin.page_overrides import overrides_page, overrides_url
from gateway.admin.views import html
from gateway.admin.views_actions import confirmed, form


def overrides_router(overrides: OverrideActions) -> APIRouter:
    router = APIRouter(default_response_class=HTMLResponse)
    store = overrides.store

    @router.get("/overrides")
    async def page(done: Annotated[int | None, Query(ge=1, le=2**62)] = None) -> HTMLResponse:
        entry = await store.get_audit(done) if done else None
        notice = entry.detail if entry and entry.event.startswith("admin_override") else ""
        return html(overrides_page(await store.list_admin_overrides(), overrides.config, notice=notice))

    @router.post("/overrides")
    async def set_override(request: Request) -> RedirectResponse:
        fields = await form(request)
        confirmed(fields)
        done, _ = await overrides.set(fields, actor=actor(request, fields.get("by", ""), "page"))
        return RedirectResponse(overrides_url(done.audit.id), status_code=303)

    @router.post("/overrides/clear")
    async def clear_override(request: Request) -> RedirectResponse:
        fields = await form(request)
        confirmed(fields)
        done = await overrides.clear(fields, actor=actor(request, fields.get("by", ""), "page"))
        return RedirectResponse(overrides_url(done.audit.id), status_code=303)

    return router
