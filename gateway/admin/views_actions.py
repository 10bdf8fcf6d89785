"""The action pages: each action is a GET that shows what it will do and a form that confirms it.

The confirmation POSTs; the result is audited and the browser lands back on the session with
a one-line notice. Cross-site posts carry no session cookie (SameSite=Strict), and the CSP
allows forms to post only to this site.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from gateway.admin import page_actions
from gateway.admin.api import checked_id, restore_latest
from gateway.admin.views import html
from gateway.store.repository import Store


def back_to(session_id: str, notice: str) -> RedirectResponse:
    return RedirectResponse(page_actions.session_url(session_id, notice), status_code=303)


def actions_router(store: Store) -> APIRouter:
    router = APIRouter(default_response_class=HTMLResponse)

    @router.get("/sessions/{session_id}/restore")
    async def confirm_restore(session_id: str) -> HTMLResponse:
        info = await store.get_session(checked_id(session_id))
        latest = next(
            (c for c in reversed(await store.list_compactions(info.id)) if c.restored_at is None), None
        )
        return html(page_actions.confirm_restore(info, latest))

    @router.post("/sessions/{session_id}/restore")
    async def restore(session_id: str, request: Request) -> RedirectResponse:
        record = await restore_latest(store, checked_id(session_id))
        return back_to(
            session_id,
            f"Undid the {record.trigger} compaction: {record.messages_archived} messages are active again.",
        )

    return router
