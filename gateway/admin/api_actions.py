"""The admin API's actions (compact, forget, undo, end, erase a user) and the audit trail that lists them.

Every action is a POST and is audited with who (``by`` in the body, and the client address),
when, what and the counts. Erasure deletes, so it also wants ``confirm`` set to
``"<platform>:<user_id>"``; ``GET /api/erase`` shows what it would remove.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from gateway.admin.actions import AdminActions, Outcome, checked_user
from gateway.admin.api import Filter, Limit, Offset, checked_id, compaction_json
from gateway.admin.errors import BadRequest
from gateway.admin.export import MEDIA_TYPES, Format, render
from gateway.store.audit_ops import AuditEntry
from gateway.store.export_ops import SessionExport
from gateway.store.repository import Store

Name = Annotated[str, Field(max_length=128, pattern=r"^[^\x00]*$")]


class ActionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    by: Name = ""
    """Who asks (recorded in the audit trail with the client address)."""


class CompactBody(ActionBody):
    focus: Annotated[str, Field(max_length=2000, pattern=r"^[^\x00]*$")] = ""


class ForgetBody(ActionBody):
    last: Annotated[int, Field(ge=1, le=1000)] | None = None
    """How many of the latest exchanges to set aside; or a range of message ids:"""
    from_id: Annotated[int, Field(ge=1)] | None = None
    to_id: Annotated[int, Field(ge=1)] | None = None


class EraseBody(ActionBody):
    platform: Name
    user_id: Name
    confirm: Name
    """Must repeat ``<platform>:<user_id>``: erasure cannot be undone."""


def actor(request: Request, by: str, channel: str) -> str:
    host = request.client.host if request.client else "unknown"
    return f"{by.strip() or 'admin'} via {channel} from {host}"


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    return dataclasses.asdict(entry)


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "message": outcome.message,
        "audit_id": outcome.audit.id,
        "compaction": compaction_json(outcome.compaction) if outcome.compaction else None,
        "erased": outcome.erased.as_dict() if outcome.erased else None,
    }


def actions_api_router(actions: AdminActions) -> APIRouter:
    router = APIRouter(prefix="/api")
    store = actions.store

    @router.post("/sessions/{session_id}/compact")
    async def compact_now(
        session_id: str, request: Request, body: Annotated[CompactBody | None, Body()] = None
    ) -> dict[str, Any]:
        body = body or CompactBody()
        done = await actions.compact(
            checked_id(session_id), focus=body.focus, actor=actor(request, body.by, "api")
        )
        return outcome_json(done)

    @router.post("/sessions/{session_id}/forget")
    async def forget(session_id: str, request: Request, body: ForgetBody) -> dict[str, Any]:
        done = await actions.forget(
            checked_id(session_id),
            last=body.last,
            from_id=body.from_id,
            to_id=body.to_id,
            actor=actor(request, body.by, "api"),
        )
        return outcome_json(done)

    @router.post("/sessions/{session_id}/restore")
    async def restore(
        session_id: str, request: Request, body: Annotated[ActionBody | None, Body()] = None
    ) -> dict[str, Any]:
        by = body.by if body else ""
        done = await actions.restore(checked_id(session_id), actor=actor(request, by, "api"))
        assert done.compaction is not None
        return {**compaction_json(done.compaction), "message": done.message, "audit_id": done.audit.id}

    @router.post("/sessions/{session_id}/end")
    async def end(
        session_id: str, request: Request, body: Annotated[ActionBody | None, Body()] = None
    ) -> dict[str, Any]:
        by = body.by if body else ""
        return outcome_json(await actions.end(checked_id(session_id), actor=actor(request, by, "api")))

    @router.get("/erase")
    async def erase_preview(
        platform: Annotated[str, Query(max_length=128)], user: Annotated[str, Query(max_length=128)]
    ) -> dict[str, Any]:
        """What erasing the user would remove (nothing changes)."""
        platform, user = checked_user(platform, user)
        counts = await store.erase_preview(platform, user)
        return {"platform": platform, "user_id": user, "would_erase": counts.as_dict()}

    @router.post("/erase")
    async def erase(request: Request, body: EraseBody) -> dict[str, Any]:
        platform, user = checked_user(body.platform, body.user_id)
        if body.confirm.strip() != f"{platform}:{user}":
            raise BadRequest(
                f"confirm: repeat '{platform}:{user}' to erase this user's data (it cannot be undone)"
            )
        return outcome_json(await actions.erase(platform, user, actor=actor(request, body.by, "api")))

    @router.get("/audit")
    async def audit(event: Filter = None, limit: Limit = 50, offset: Offset = 0) -> dict[str, Any]:
        entries, total = await store.list_audit(limit=limit, offset=offset, event=event or None)
        end = offset + len(entries)
        return {
            "total": total,
            "offset": offset,
            "next_offset": end if end < total else None,
            "entries": [audit_json(e) for e in entries],
        }

    return router


def export_response(data: SessionExport, fmt: Format) -> Response:
    """The export as a download named after the session."""
    name = f"hygieia-{data.session['id']}.{fmt}"
    return Response(
        render(data, fmt),
        media_type=MEDIA_TYPES[fmt],
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "Cache-Control": "no-store",
            # The transcript is users' text: a browser must never guess it is HTML and run it.
            "X-Content-Type-Options": "nosniff",
        },
    )


def export_router(store: Store) -> APIRouter:
    """``/api/sessions/{id}/export`` and the page's ``/sessions/{id}/export`` (same download)."""
    router = APIRouter()

    async def export(session_id: str, format: Format = "jsonl") -> Response:
        return export_response(await store.export_session(checked_id(session_id)), format)

    router.add_api_route("/api/sessions/{session_id}/export", export, methods=["GET"])
    router.add_api_route("/sessions/{session_id}/export", export, methods=["GET"], include_in_schema=False)
    return router
