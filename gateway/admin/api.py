"""The JSON routes under ``/api``: sessions, transcripts, search, restore, the context series."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from agent.errors import NotFound
from agent.types import ChatMessage, CompactionRecord, SearchFilters, SearchHit
from gateway.admin.errors import utc_time
from gateway.store.admin_ops import ContextPoint
from gateway.store.find_ops import SessionLabel, SessionQuery, SessionSort
from gateway.store.records import SessionInfo
from gateway.store.repository import Store

State = Literal["active", "archived", "all"]
Order = Literal["asc", "desc"]
Sort = Literal["relevance", "recent"]
SEARCH_SORTS: tuple[str, ...] = ("relevance", "recent")
"""The orders the store's search offers; the search page's ``sort`` select lists exactly these."""
MAX_OFFSET = 1_000_000_000
_SESSION_ID = re.compile(r"[\w.:-]{1,128}", re.ASCII)
# A filter value: bounded, and without NUL (PostgreSQL refuses it in text parameters).
Filter = Annotated[str | None, Query(max_length=256, pattern=r"^[^\x00]*$")]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]


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
    return {**dataclasses.asdict(c), "tokens_freed": c.tokens_freed}


def hit_json(h: SearchHit, label: SessionLabel | None = None) -> dict[str, Any]:
    """A hit with the key and platform of its session (what an operator recognises)."""
    return {
        **dataclasses.asdict(h),
        "session_key": label.key if label else None,
        "platform": label.platform if label else None,
    }


async def hits_json(store: Store, hits: list[SearchHit]) -> list[dict[str, Any]]:
    labels = await store.session_labels([h.session_id for h in hits])
    return [hit_json(h, labels.get(h.session_id)) for h in hits]


def session_query(
    platform: str | None,
    chat: str | None,
    user: str | None,
    key: str | None,
    since: datetime | None,
    sort: SessionSort,
    order: Order,
    active_only: bool,
) -> SessionQuery:
    return SessionQuery(
        platform=platform or None,
        chat_id=chat or None,
        user_id=user or None,
        key=key or None,
        active_since=utc_time(since, "since"),
        include_ended=not active_only,
        sort=sort,
        descending=order == "desc",
    )


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
        response: Response,
        platform: Filter = None,
        chat: Filter = None,
        user: Filter = None,
        key: Filter = None,
        since: datetime | None = None,
        sort: SessionSort = "activity",
        order: Order = "desc",
        limit: Limit = 50,
        offset: Offset = 0,
        active_only: bool = False,
    ) -> list[dict[str, Any]]:
        """Sessions, filtered, sorted, paged; ``X-Total-Count`` says how many match in all."""
        query = session_query(platform, chat, user, key, since, sort, order, active_only)
        rows, total = await store.find_sessions(query, limit=limit, offset=offset)
        response.headers["X-Total-Count"] = str(total)
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
            since=utc_time(since, "since"),
            until=utc_time(until, "until"),
            state=state,
        )
        return await hits_json(store, await store.search(q, filters, limit=limit, offset=offset, sort=sort))

    return router
