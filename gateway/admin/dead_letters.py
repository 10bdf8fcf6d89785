"""``/api/dead-letters`` and ``/api/sessions/{id}/dead-letters``: what was given up on, and why."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter

from gateway.admin.api import Limit, checked_id
from gateway.store.repository import Store


def dead_letter_router(store: Store) -> APIRouter:
    """Failed inbox items and outbox rows (dead letters), newest first."""
    router = APIRouter(prefix="/api")

    @router.get("/dead-letters")
    async def every_chat(limit: Limit = 100) -> list[dict[str, Any]]:
        return [dataclasses.asdict(d) for d in await store.dead_letters(limit=limit)]

    @router.get("/sessions/{session_id}/dead-letters")
    async def of_session(session_id: str, limit: Limit = 100) -> list[dict[str, Any]]:
        info = await store.get_session(checked_id(session_id))
        return [dataclasses.asdict(d) for d in await store.dead_letters(info, limit=limit)]

    return router
