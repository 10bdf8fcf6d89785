"""Reads the admin API needs: a health probe, a paged transcript, the context-size series, totals."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import NotFound, StoreError
from agent.loop_turn import REFUSAL_MARK
from agent.types import ChatMessage, SearchState
from gateway.store.base import Repo
from gateway.store.convert import to_message
from gateway.store.message_ops import ORDER
from gateway.store.models import compactions, messages, sessions, usage

SERIES_LIMIT = 5000
"""At most this many (the most recent) calls in a context series: enough for a chart."""


@dataclass(frozen=True, slots=True)
class ContextPoint:
    """One chat API call: when, and its prompt size (input + cache write + cache read)."""

    at: datetime
    prompt_tokens: int
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class MessagePage:
    """A page of a session's transcript in order; ``total`` counts every row of that state."""

    messages: list[ChatMessage]
    total: int
    offset: int


@dataclass(frozen=True, slots=True)
class StoreTotals:
    """Counts over the whole database, for metrics."""

    sessions_current: int = 0
    sessions_ended: int = 0
    messages_active: int = 0
    messages_archived: int = 0
    compactions_by_trigger: dict[str, int] = field(default_factory=dict)
    refusals_by_category: dict[str, int] = field(default_factory=dict)


def refusal_categories(texts: list[str]) -> dict[str, int]:
    """How many refusals each category had, read off the marks of stored refused replies."""
    counts: dict[str, int] = {}
    for text in texts:
        found = _REFUSAL_CATEGORY.search(text)
        category = found.group(1) if found else "unspecified"
        counts[category] = counts.get(category, 0) + 1
    return counts


_REFUSAL_CATEGORY = re.compile(re.escape(REFUSAL_MARK) + r" \(refusal: ([^)]*)\)\]")


def _state_condition(state: SearchState) -> list[ColumnElement[bool]]:
    # Same meaning as SearchFilters.state: "archived" is every row out of the active view.
    if state == "active":
        return [messages.c.active.is_(True)]
    if state == "archived":
        return [messages.c.active.is_(False)]
    return []


class AdminOps(Repo):
    async def ping(self) -> bool:
        """True when the database answers and has our schema."""
        try:
            async with self._tx(write=False) as s:
                await s.execute(select(sessions.c.id).limit(1))
        except (SQLAlchemyError, OSError, StoreError):
            return False
        return True

    async def messages_page(
        self, session_id: str, *, state: SearchState = "all", offset: int = 0, limit: int = 100
    ) -> MessagePage:
        """Rows of the session in (seq, sub_seq) order, filtered by state, paged.

        A page in the second half is read from the end (newest first, then turned round), so the
        latest page of a long session never walks past all the rows before it.
        """
        offset, limit = max(offset, 0), max(limit, 0)
        where = [messages.c.session_id == session_id, *_state_condition(state)]
        async with self._tx(write=False) as s:
            total = int(await s.scalar(select(func.count()).select_from(messages).where(*where)) or 0)
            page: list[ChatMessage] = []
            end = min(offset + limit, total)
            if end > offset and offset > total // 2:
                backwards = [c.desc() for c in ORDER]
                stmt = (
                    select(messages)
                    .where(*where)
                    .order_by(*backwards)
                    .offset(total - end)
                    .limit(end - offset)
                )
                page = [to_message(r) for r in (await s.execute(stmt)).mappings()][::-1]
            elif end > offset:
                stmt = select(messages).where(*where).order_by(*ORDER).offset(offset).limit(limit)
                page = [to_message(r) for r in (await s.execute(stmt)).mappings()]
        return MessagePage(messages=page, total=total, offset=offset)

    async def session_of_message(self, message_id: int) -> str:
        """The id of the session a message belongs to; NotFound if there is no such message."""
        async with self._tx(write=False) as s:
            found = await s.scalar(select(messages.c.session_id).where(messages.c.id == message_id))
        if found is None:
            raise NotFound(f"no message {message_id}")
        return str(found)

    async def message_position(self, session_id: str, message_id: int) -> int:
        """How many rows of the session (any state) come before the message; NotFound if not there."""
        m = messages
        async with self._tx(write=False) as s:
            row = (
                await s.execute(
                    select(m.c.seq, m.c.sub_seq).where(m.c.id == message_id, m.c.session_id == session_id)
                )
            ).first()
            if row is None:
                raise NotFound(f"no message {message_id} in session {session_id}")
            seq, sub_seq = row
            before = or_(m.c.seq < seq, and_(m.c.seq == seq, m.c.sub_seq < sub_seq))
            return int(await s.scalar(select(func.count()).where(m.c.session_id == session_id, before)) or 0)

    async def context_series(self, session_id: str, *, limit: int = SERIES_LIMIT) -> list[ContextPoint]:
        """The session's chat calls, oldest first (the latest ``limit`` of them)."""
        size = usage.c.input_tokens + usage.c.cache_write_tokens + usage.c.cache_read_tokens
        stmt = (
            select(usage.c.created_at, size.label("size"), usage.c.estimated)
            .where(usage.c.session_id == session_id, usage.c.purpose == "chat")
            .order_by(usage.c.created_at.desc(), usage.c.id.desc())
            .limit(max(limit, 0))
        )
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt)).all()
        return [ContextPoint(at=at, prompt_tokens=int(n), estimated=bool(e)) for at, n, e in reversed(rows)]

    async def store_totals(self) -> StoreTotals:
        """Sessions (current, ended), messages (active, archived), compactions per trigger."""
        ended = sessions.c.ended_at.is_not(None)
        async with self._tx(write=False) as s:
            by_end = {
                bool(e): int(n) for e, n in await s.execute(select(ended, func.count()).group_by(ended))
            }
            active = await s.scalar(select(func.count()).select_from(messages).where(messages.c.active))
            archived = await s.scalar(select(func.count()).select_from(messages).where(messages.c.compacted))
            triggers = select(compactions.c.trigger, func.count()).group_by(compactions.c.trigger)
            by_trigger = {str(t): int(n) for t, n in await s.execute(triggers)}
            refused = await s.scalars(select(messages.c.text).where(*_refused()))
            refusals = refusal_categories([str(t) for t in refused])
        return StoreTotals(
            sessions_current=by_end.get(False, 0),
            sessions_ended=by_end.get(True, 0),
            messages_active=int(active or 0),
            messages_archived=int(archived or 0),
            compactions_by_trigger=by_trigger,
            refusals_by_category=refusals,
        )

    async def session_refusals(self, session_id: str) -> dict[str, int]:
        """This session's refusals per category (the stored refused replies, archived ones too)."""
        async with self._tx(write=False) as s:
            refused = await s.scalars(
                select(messages.c.text).where(messages.c.session_id == session_id, *_refused())
            )
            return refusal_categories([str(t) for t in refused])


def _refused() -> list[ColumnElement[bool]]:
    # Refused replies are rare notices: the kind narrows the scan, the mark picks them out.
    return [messages.c.kind == "notice", messages.c.text.contains(REFUSAL_MARK, autoescape=True)]
