"""The JSON routes under ``/api``: sessions, transcripts, search, restore, the context series."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from agent.errors import NotFound
from agent.types import ChatMessage, CompactionRecord, SearchFilters, SearchHit
from gateway.store.admin_ops import ContextPoint
from gateway.store.records import SessionInfo
from gateway.store.repository import Store

State = Literal["active", "archived", "all"]
Sort = Literal["relevance", "recent"]
MAX_OFFSET = 1_000_000_000
_SESSION_ID = re.compile(r"[\w.:-]{1,128}", re.ASCII)
# A filter value: bounded, and without NUL (PostgreSQL refuses it in text parameters).
Filter = Annotated[str | None, Query(max_length=256, pattern=r"^[^\x00]*$")]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
AUDIT_EVENT = "admin_restore"


def checked_id(session_id: str) -> str:
    """The id, or NotFound when it cannot be one of ours (never reaches the database)."""
    if not _SESSION_ID.fullmatch(session_id):
        raise NotFound(f"no session {session_id[:64]!r}")
    return session_id


def utc(value: datetime | None) -> datetime | None:
    """A naive time is taken as UTC."""
    return value if value is None or value.tzinfo is not None else value.replace(tzinfo=UTC)


def session_json(info: SessionInfo, *, full: bool = False) -> dict[str, Any]:
    data = dataclasses.asdict(info)
    data["ended"] = info.ended
    if not full:
        data.pop("system_prompt")
    return data


def message_json(m: ChatMessage) -> dict[str, Any]:
    return {**dataclasses.asdict(m), "text": m.text}


def compaction_json(c: CompactionRecord) -> dict[str, Any]:
    return dataclasses.asdict(c)


def hit_json(h: SearchHit) -> dict[str, Any]:
    return dataclasses.asdict(h)


def context_json(
    session_id: str, calls: list[ContextPoint], compactions: list[CompactionRecord]
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "calls": [dataclasses.asdict(p) for p in calls],
        "compactions": [
            {
                "id": c.id,
                "at": c.created_at,
                "trigger": c.trigger,
                "status": c.status,
                "tokens_before": c.tokens_before,
                "tokens_after": c.tokens_after,
                "restored": c.restored_at is not None,
            }
            for c in compactions
        ],
    }


def api_router(store: Store) -> APIRouter:
    """The ``/api`` routes over ``store``."""
    router = APIRouter(prefix="/api")

    @router.get("/sessions")
    async def list_sessions(
        platform: Filter = None, limit: Limit = 50, offset: Offset = 0, active_only: bool = False
    ) -> list[dict[str, Any]]:
        rows = await store.list_sessions(
            limit=limit, offset=offset, platform=platform, include_ended=not active_only
        )
        return [session_json(r) for r in rows]

    @router.get("/sessions/{session_id}")
    async def show_session(session_id: str) -> dict[str, Any]:
        info = await store.get_session(checked_id(session_id))
        active, archived = await store.message_counts(info.id)
        return {
            "session": session_json(info, full=True),
            "counts": {"active": active, "archived": archived},
            "compactions": [compaction_json(c) for c in await store.list_compactions(info.id)],
            "usage": dataclasses.asdict(await store.usage_summary(info.id)),
        }

    @router.get("/sessions/{session_id}/messages")
    async def session_messages(
        session_id: str, state: State = "all", offset: Offset = 0, limit: Limit = 100
    ) -> dict[str, Any]:
        info = await store.get_session(checked_id(session_id))
        page = await store.messages_page(info.id, state=state, offset=offset, limit=limit)
        end = page.offset + len(page.messages)
        return {
            "session_id": info.id,
            "state": state,
            "total": page.total,
            "offset": page.offset,
            "next_offset": end if end < page.total else None,
            "messages": [message_json(m) for m in page.messages],
        }

    @router.get("/sessions/{session_id}/context")
    async def session_context(session_id: str) -> dict[str, Any]:
        info = await store.get_session(checked_id(session_id))
        calls = await store.context_series(info.id)
        return context_json(info.id, calls, await store.list_compactions(info.id))

    @router.post("/sessions/{session_id}/restore")
    async def restore(session_id: str) -> dict[str, Any]:
        record = await restore_latest(store, checked_id(session_id))
        return compaction_json(record)

    @router.get("/search")
    async def search(
        q: Annotated[str, Query(max_length=100_000)] = "",
        platform: Filter = None,
        chat: Filter = None,
        session: Filter = None,
        user: Filter = None,
        since: datetime | None = None,
        until: datetime | None = None,
        state: State = "all",
        limit: Limit = 20,
        offset: Offset = 0,
        sort: Sort = "relevance",
    ) -> list[dict[str, Any]]:
        filters = SearchFilters(
            platform=platform,
            chat_id=chat,
            session_id=session,
            user_id=user,
            since=utc(since),
            until=utc(until),
            state=state,
        )
        hits = await store.search(q, filters, limit=limit, offset=offset, sort=sort)
        return [hit_json(h) for h in hits]

    return router


async def restore_latest(store: Store, session_id: str) -> CompactionRecord:
    """Undo the session's latest compaction, and say so in the audit trail."""
    await store.get_session(session_id)  # NotFound for an unknown session, before anything changes
    record = await store.restore_latest_compaction(session_id)
    await store.audit(
        AUDIT_EVENT, platform=None, user_id=None, detail=f"session {session_id} compaction {record.id}"
    )
    return record
