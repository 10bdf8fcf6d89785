"""The archive's read-only MCP tools: search every message, page a session, read a message in context.

Each tool answers one JSON document. Bad input (an unknown or ambiguous session, a bad time, a
filter out of range) is a tool error of one line; nothing here writes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import HygieiaError
from agent.types import ChatMessage, SearchFilters, SearchHit, SearchSort, SearchState, snippet_parts
from gateway.store.repository import Store

MAX_SEARCH = 1000
"""The largest ``limit`` of a search, as ``hygieia sessions search --limit``."""
MAX_PAGE = 200
"""The largest page of ``read_session``."""
MAX_AROUND = 20
"""The most neighbours ``get_message`` gives on each side."""
MAX_TEXT = 20_000
"""A message's text beyond this many characters is cut (a pasted log would fill a client's context)."""
SHOWN_CANDIDATES = 10


def archive_server(store: Store) -> MCPServer:
    """An MCP server whose tools read ``store``: ``search_sessions``, ``read_session``, ``get_message``."""
    srv: MCPServer = MCPServer(
        "hygieia-archive",
        instructions="Read-only access to Hygieia's chat history, archived (compacted) turns included.",
        log_level="WARNING",
    )

    @srv.tool(
        description="Full-text search over every message of every session, archived (compacted) ones "
        'included. query: words, "a phrase", -exclude, prefix*. Filters: platform (telegram, discord, '
        "console), chat (chat id), session (id or a unique start of it), user (user id), since/until "
        "(ISO 8601, UTC when no offset), state (all|active|archived), limit (1-1000), sort "
        "(relevance|recent)."
    )
    async def search_sessions(
        query: str,
        platform: str | None = None,
        chat: str | None = None,
        session: str | None = None,
        user: str | None = None,
        since: str | None = None,
        until: str | None = None,
        state: str = "all",
        limit: int = 20,
        sort: str = "relevance",
    ) -> str:
        if state not in ("all", "active", "archived"):
            raise ToolError(f"state: {state!r} is not one of all, active, archived")
        if sort not in ("relevance", "recent"):
            raise ToolError(f"sort: {sort!r} is not one of relevance, recent")
        if not 1 <= limit <= MAX_SEARCH:
            raise ToolError(f"limit: {limit} is out of range (1 to {MAX_SEARCH})")
        async with _answering():
            filters = SearchFilters(
                platform=platform or None,
                chat_id=chat or None,
                user_id=user or None,
                session_id=await _resolve(store, session) if session else None,
                since=_time(since, "since"),
                until=_time(until, "until"),
                state=cast(SearchState, state),
            )
            hits = await store.search(query, filters, limit=limit, sort=cast(SearchSort, sort))
            return _json({"query": query, "count": len(hits), "hits": [_hit(h) for h in hits]})

    @srv.tool(
        description="A page of a session's messages in order, archived (compacted) ones included and "
        "marked by state. session: its id or a unique start of it; offset: messages to skip; limit: "
        f"page size (1-{MAX_PAGE})."
    )
    async def read_session(session: str, offset: int = 0, limit: int = 50) -> str:
        if offset < 0:
            raise ToolError(f"offset: {offset} is negative")
        if not 1 <= limit <= MAX_PAGE:
            raise ToolError(f"limit: {limit} is out of range (1 to {MAX_PAGE})")
        async with _answering():
            info = await store.get_session(await _resolve(store, session))
            page = await store.messages_page(info.id, state="all", offset=offset, limit=limit)
            following = offset + len(page.messages)
            return _json(
                {
                    "session": {"id": info.id, "key": info.key, "ended": info.ended},
                    "total": page.total,
                    "offset": page.offset,
                    "next_offset": following if following < page.total else None,
                    "messages": [_message(m) for m in page.messages],
                }
            )

    @srv.tool(
        description="One message by its id (search hits give it), with up to `around` messages before "
        f"and after it in its session (0-{MAX_AROUND}); archived ones marked."
    )
    async def get_message(message_id: int, around: int = 3) -> str:
        if not 0 <= around <= MAX_AROUND:
            raise ToolError(f"around: {around} is out of range (0 to {MAX_AROUND})")
        async with _answering():
            session_id = await store.session_of_message(message_id)
            position = await store.message_position(session_id, message_id)
            start = max(position - around, 0)
            page = await store.messages_page(
                session_id, state="all", offset=start, limit=position - start + around + 1
            )
            return _json(
                {
                    "session_id": session_id,
                    "message_id": message_id,
                    "position": position,
                    "total": page.total,
                    "messages": [_message(m) for m in page.messages],
                }
            )

    return srv


class _answering:
    """Turns the store's errors into one-line tool errors (the client sees the reason, not a traceback)."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, HygieiaError):
            raise ToolError(_first_line(exc)) from None
        if isinstance(exc, SQLAlchemyError):
            raise ToolError(f"database error: {_first_line(getattr(exc, 'orig', None) or exc)}") from None


async def _resolve(store: Store, given: str) -> str:
    """The one session id starting with ``given`` (as the CLI takes them); a tool error otherwise."""
    found, total = await store.sessions_by_prefix(given, limit=SHOWN_CANDIDATES)
    if total == 1:
        return found[0].id
    if total == 0:
        raise ToolError(f"no session id starts with {given.strip()!r}")
    ids = ", ".join(s.id for s in found) + (f" and {total - len(found)} more" if total > len(found) else "")
    raise ToolError(f"{total} sessions have ids starting with {given.strip()!r}; give more of it: {ids}")


def _time(value: str | None, name: str) -> datetime | None:
    """An ISO 8601 time in UTC (one without an offset is taken as UTC)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(f"{name}: {value!r} is not an ISO 8601 time (e.g. 2026-05-01T12:00)") from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ToolError(f"{name}: {value!r} is out of range once converted to UTC") from None


def _state(active: bool, compacted: bool) -> str:
    return "active" if active else ("archived" if compacted else "retired")


def _hit(h: SearchHit) -> dict[str, Any]:
    return {
        "message_id": h.message_id,
        "session_id": h.session_id,
        "created_at": h.created_at.isoformat(),
        "role": h.role,
        "kind": h.kind,
        "author": h.author_name,
        "state": _state(h.active, h.compacted),
        # Matches in [brackets]: the store's private-use markers mean nothing to a client.
        "snippet": "".join(f"[{part}]" if match else part for part, match in snippet_parts(h.snippet)),
    }


def _message(m: ChatMessage) -> dict[str, Any]:
    text = m.text
    return {
        "id": m.id,
        "seq": m.seq,
        "created_at": m.created_at.isoformat() if m.created_at else None,
        "role": m.role,
        "kind": m.kind,
        "author": m.author_name,
        "state": _state(m.active, m.compacted),
        "text": text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… [{len(text) - MAX_TEXT} more chars]",
    }


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
