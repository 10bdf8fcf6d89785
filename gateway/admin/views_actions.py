"""The action pages: each action is a GET that shows what it will do and a form that confirms it.

The confirmation POSTs; the result is audited and the browser lands back on the session (or the
audit view) with a one-line notice. A post signed in by the cookie must come from this origin
(gateway.admin.origin), and the CSP lets forms post only to this site. Erasure asks to type a
code that only its confirmation page shows.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from gateway.admin import page_actions
from gateway.admin.actions import AdminActions, checked_user
from gateway.admin.api import Filter, Limit, Offset, checked_id
from gateway.admin.api_actions import actor
from gateway.admin.errors import BadRequest
from gateway.admin.views import html

MAX_FORM_BYTES = 16 * 1024


async def form(request: Request) -> dict[str, str]:
    """An urlencoded form body (the pages post nothing else), bounded; one value per field."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise BadRequest("form: too large")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0].replace("\x00", "") for k, v in fields.items() if v}


def confirmed(fields: dict[str, str]) -> None:
    if fields.get("confirm") != "yes":
        raise BadRequest("confirm: use the Confirm button of the confirmation page")


def back_to(session_id: str, audit_id: int) -> RedirectResponse:
    return RedirectResponse(page_actions.session_url(session_id, audit_id), status_code=303)


def erase_code(key: bytes, platform: str, user: str) -> str:
    """What the erase page asks to type for exactly this platform and user: keyed by ``key`` (from
    the admin token), so it cannot be guessed, and the same on every admin process."""
    pair = f"{len(platform)}:{platform}{len(user)}:{user}".encode("utf-8", "surrogatepass")
    digest = base64.b32encode(hmac.new(key, pair, hashlib.sha256).digest()).decode()
    return f"ERASE-{digest[:4]}-{digest[4:8]}"


def actions_router(actions: AdminActions, *, confirm_key: bytes) -> APIRouter:
    """The action pages; ``confirm_key`` keys the erase confirmation codes."""
    router = APIRouter(default_response_class=HTMLResponse)
    store = actions.store

    @router.get("/sessions/{session_id}/compact")
    async def confirm_compact(session_id: str) -> HTMLResponse:
        info = await store.get_session(checked_id(session_id))
        active, _ = await store.message_counts(info.id)
        return html(page_actions.confirm_compact(info, active, available=actions.engine is not None))

    @router.post("/sessions/{session_id}/compact")
    async def compact_now(session_id: str, request: Request) -> RedirectResponse:
        fields = await form(request)
        confirmed(fields)
        who = actor(request, fields.get("by", ""), "page")
        done = await actions.compact(checked_id(session_id), focus=fields.get("focus", ""), actor=who)
        return back_to(session_id, done.audit.id)

    @router.get("/sessions/{session_id}/restore")
    async def confirm_restore(session_id: str) -> HTMLResponse:
        info = await store.get_session(checked_id(session_id))
        compactions = await store.list_compactions(info.id)
        latest = next((c for c in reversed(compactions) if c.restored_at is None), None)
        return html(page_actions.confirm_restore(info, latest))

    @router.post("/sessions/{session_id}/restore")
    async def restore(session_id: str, request: Request) -> RedirectResponse:
        fields = await form(request)
        confirmed(fields)
        done = await actions.restore(
            checked_id(session_id), actor=actor(request, fields.get("by", ""), "page")
        )
        return back_to(session_id, done.audit.id)

    @router.get("/sessions/{session_id}/end")
    async def confirm_end(session_id: str) -> HTMLResponse:
        info = await store.get_session(checked_id(session_id))
        return html(page_actions.confirm_end(info))

    @router.post("/sessions/{session_id}/end")
    async def end(session_id: str, request: Request) -> RedirectResponse:
        fields = await form(request)
        confirmed(fields)
        done = await actions.end(checked_id(session_id), actor=actor(request, fields.get("by", ""), "page"))
        return back_to(session_id, done.audit.id)

    @router.get("/erase")
    async def erase_form(
        platform: Annotated[str, Query(max_length=128)] = "",
        user: Annotated[str, Query(max_length=128)] = "",
    ) -> HTMLResponse:
        if not platform.strip() and not user.strip():
            return html(page_actions.erase_form())
        platform, user = checked_user(platform, user)
        counts = await store.erase_preview(platform, user)
        return html(
            page_actions.confirm_erase(platform, user, counts, erase_code(confirm_key, platform, user))
        )

    @router.post("/erase")
    async def erase(request: Request) -> RedirectResponse:
        fields = await form(request)
        platform, user = checked_user(fields.get("platform", ""), fields.get("user", ""))
        typed = fields.get("typed", "").strip().upper()
        if not hmac.compare_digest(typed.encode(), erase_code(confirm_key, platform, user).encode()):
            raise BadRequest("type the code the confirmation page shows to erase (it cannot be undone)")
        done = await actions.erase(platform, user, actor=actor(request, fields.get("by", ""), "page"))
        return RedirectResponse(page_actions.audit_url(done.audit.id), status_code=303)

    @router.get("/audit")
    async def audit(
        event: Filter = None,
        limit: Limit = 50,
        offset: Offset = 0,
        done: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    ) -> HTMLResponse:
        entries, total = await store.list_audit(limit=limit, offset=offset, event=event or None)
        entry = await store.get_audit(done) if done else None
        notice = entry.detail if entry else ""
        return html(page_actions.audit_page(entries, total=total, offset=offset, limit=limit, notice=notice))

    return router
