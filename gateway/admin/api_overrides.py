"""The admin API's per-chat overrides: list, set and clear (each change audited).

``GET /api/overrides`` lists the admin-set entries and the config's; ``POST /api/overrides``
sets (replaces) one chat's or thread's entry; ``POST /api/overrides/clear`` removes it. A change
applies from the chat's next session (``/new``), never to a running one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import ConfigDict, Field

from gateway.admin.api_actions import ActionBody, Name, actor
from gateway.admin.overrides import MAX_PROMPT_CHARS, OverrideActions, override_json

Prompt = Annotated[str, Field(max_length=MAX_PROMPT_CHARS)]


class ChatBody(ActionBody):
    platform: Name
    chat: Name
    thread: Name | None = None


class OverrideBody(ChatBody):
    model_config = ConfigDict(extra="forbid")
    system_prompt: Prompt | None = None
    model: Name | None = None
    summary_model: Name | None = None
    budget_tokens: int | None = None
    tools: dict[str, list[Name]] | None = None
    """Globs narrowing the chat's MCP tools: ``{"include": [...], "exclude": [...]}``."""


def overrides_api_router(overrides: OverrideActions) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/overrides")
    async def listing() -> dict[str, Any]:
        admin = await overrides.store.list_admin_overrides()
        return {
            "admin": [override_json(e, "admin") for e in admin],
            "config": [override_json(e, "config") for e in overrides.config],
        }

    @router.post("/overrides")
    async def set_override(request: Request, body: OverrideBody) -> dict[str, Any]:
        values = body.model_dump(exclude={"by"})
        done, entry = await overrides.set(values, actor=actor(request, body.by, "api"))
        return {"message": done.message, "audit_id": done.audit.id, "override": override_json(entry, "admin")}

    @router.post("/overrides/clear")
    async def clear_override(request: Request, body: ChatBody) -> dict[str, Any]:
        done = await overrides.clear(body.model_dump(exclude={"by"}), actor=actor(request, body.by, "api"))
        return {"message": done.message, "audit_id": done.audit.id}

    return router
