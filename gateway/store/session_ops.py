"""Sessions: one row per conversation, at most one current (not ended) per key."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, case, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.exc import StaleDataError

from agent.clock import utcnow
from agent.errors import NotFound, StoreError
from agent.types import ContextState
from gateway.store.base import CONFLICT_RETRIES, Repo
from gateway.store.columns import clean_json
from gateway.store.convert import (
    SESSION_FIELDS,
    state_from_json,
    state_to_json,
    to_session,
    to_session_summary,
)
from gateway.store.models import SessionRow, compactions, messages, sessions
from gateway.store.override_ops import AdminOverride, overrides_in
from gateway.store.records import SessionInfo, SessionSummary

SESSION_COLUMNS = tuple(sessions.c[name] for name in SESSION_FIELDS)
CURRENT_SESSION = select(*SESSION_COLUMNS).where(
    sessions.c.key == bindparam("key"), sessions.c.ended_at.is_(None)
)
_NEW_SESSION = insert(sessions).returning(*SESSION_COLUMNS)

FrozenSettings = tuple[str, str, dict[str, Any] | None]
"""What a new session freezes: its system prompt, model and chat overrides."""


@dataclass(frozen=True, slots=True)
class SessionOpening:
    """A key's session, to be opened if it has none: the chat it belongs to, and ``settle``,
    which gets the chat's admin-set overrides (read in the transaction that creates the
    session) and returns the :data:`FrozenSettings` to freeze. ``settle`` runs inside that
    transaction, on SQLite in a worker thread: a pure function."""

    key: str
    platform: str
    chat_id: str
    thread_id: str | None
    user_id: str | None
    settle: Callable[[list[AdminOverride]], FrozenSettings]


def open_in(conn: Connection, opening: SessionOpening) -> SessionInfo:
    """The key's current session, created if it has none, inside ``conn``'s transaction (a
    worker that created it first makes the insert fail: read theirs in a new transaction)."""
    row = conn.execute(CURRENT_SESSION, {"key": opening.key}).first()
    if row is not None:
        return to_session(row)
    system_prompt, model, chat_overrides = opening.settle(
        overrides_in(conn, opening.platform, opening.chat_id)
    )
    now = utcnow()
    values = {
        "id": uuid.uuid4().hex,
        "key": opening.key,
        "platform": opening.platform,
        "chat_id": opening.chat_id,
        "thread_id": opening.thread_id,
        "user_id": opening.user_id,
        "system_prompt": system_prompt.replace("\x00", ""),
        "model": model,
        "chat_overrides": chat_overrides,
        "created_at": now,
        "last_activity_at": now,
        "compaction_count": 0,
        "view_version": 0,
        "version": 1,  # what the ORM's version counter starts at
    }
    return to_session(conn.execute(_NEW_SESSION, values).one())


# Built once: it runs after every call, and building a statement costs more than running it.
_SAVE_STATE = (
    update(sessions)
    .where(sessions.c.id == bindparam("sid"))
    .values(
        context_state=bindparam("state", type_=sessions.c.context_state.type),
        last_prompt_tokens=bindparam("tokens", type_=sessions.c.last_prompt_tokens.type),
        last_prompt_at=bindparam("at", type_=sessions.c.last_prompt_at.type),
        version=sessions.c.version + 1,
    )
    .returning(sessions.c.id)
)


def state_values(session_id: str, state: ContextState) -> dict[str, Any]:
    """The parameters of :func:`save_state_in` (built on the event loop, not in the thread)."""
    return {
        "sid": session_id,
        "state": clean_json(state_to_json(state)),
        "tokens": state.last_prompt_tokens,
        "at": state.last_prompt_at,
    }


def save_state_in(conn: Connection, values: dict[str, Any]) -> None:
    """Save a session's compression state inside ``conn``'s transaction (the row's ``version``
    moves on, as any update of it does)."""
    if conn.scalar(_SAVE_STATE, values) is None:
        raise NotFound(f"no session {values['sid']}")


class SessionOps(Repo):
    async def get_or_create_session(
        self,
        key: str,
        *,
        platform: str,
        chat_id: str,
        thread_id: str | None = None,
        user_id: str | None = None,
        system_prompt: str,
        model: str,
        chat_overrides: dict[str, Any] | None = None,
    ) -> SessionInfo:
        """The current session for ``key``, created (with this frozen system prompt, model and chat
        overrides) if there is none."""
        settings: FrozenSettings = (system_prompt, model, chat_overrides)
        return await self.open_session(
            SessionOpening(key, platform, chat_id, thread_id, user_id, lambda _admin: settings)
        )

    async def open_session(self, opening: SessionOpening) -> SessionInfo:
        """The key's current session, or a new one settled as ``opening`` says, in one
        transaction (on a SQLite file, one worker-thread call)."""
        for _ in range(CONFLICT_RETRIES):
            try:
                return await self.db.write_at_once(lambda conn: open_in(conn, opening))
            except IntegrityError:
                continue  # another worker created it first: read theirs
        raise StoreError(f"could not create a session for {opening.key!r}")

    async def current_session(self, key: str) -> SessionInfo | None:
        async with self._tx(write=False) as s:
            row = await s.scalar(
                select(SessionRow).where(SessionRow.key == key, SessionRow.ended_at.is_(None))
            )
            return None if row is None else to_session(row)

    async def get_session(self, session_id: str) -> SessionInfo:
        async with self._tx(write=False) as s:
            row = await s.get(SessionRow, session_id)
            if row is None:
                raise NotFound(f"no session {session_id}")
            return to_session(row)

    async def _update_session(self, session_id: str, change: Callable[[SessionRow], None]) -> SessionInfo:
        """Read-modify-write under optimistic locking (``version``), retried on a lost race."""
        for _ in range(CONFLICT_RETRIES):
            try:
                async with self._tx() as s:
                    row = await s.get(SessionRow, session_id)
                    if row is None:
                        raise NotFound(f"no session {session_id}")
                    change(row)
                    await s.flush()
                    return to_session(row)
            except StaleDataError:
                continue
        raise StoreError(f"session {session_id} kept changing under us")

    async def end_session(self, session_id: str, reason: str) -> None:
        """Mark the session ended (a later message for its key starts a new one). Idempotent."""

        def change(row: SessionRow) -> None:
            if row.ended_at is None:
                row.ended_at = utcnow()
                row.end_reason = reason

        await self._update_session(session_id, change)

    async def touch_session(self, session_id: str, at: datetime) -> None:
        def change(row: SessionRow) -> None:
            row.last_activity_at = at

        await self._update_session(session_id, change)

    async def list_sessions(
        self, *, limit: int = 50, offset: int = 0, platform: str | None = None, include_ended: bool = True
    ) -> list[SessionSummary]:
        """Sessions, most recently active first, with their message and compaction counts."""
        m, c = messages.alias("m"), compactions.alias("c")
        active = select(func.count()).where(m.c.session_id == sessions.c.id, m.c.active).scalar_subquery()
        archived = (
            select(func.count()).where(m.c.session_id == sessions.c.id, m.c.compacted).scalar_subquery()
        )
        count_c = select(func.count()).where(c.c.session_id == sessions.c.id).scalar_subquery()
        stmt = select(SessionRow, active.label("a"), archived.label("b"), count_c.label("c"))
        if platform is not None:
            stmt = stmt.where(SessionRow.platform == platform)
        if not include_ended:
            stmt = stmt.where(SessionRow.ended_at.is_(None))
        stmt = stmt.order_by(SessionRow.last_activity_at.desc(), SessionRow.id).limit(limit).offset(offset)
        async with self._tx(write=False) as s:
            result = await s.execute(stmt)
            return [to_session_summary(row, active=a, archived=b, compactions=n) for row, a, b, n in result]

    async def live_models(self) -> dict[str, int]:
        """How many live (not ended) sessions run on each model: a session keeps the model it
        started with until it ends (``/new``, a reset), whatever the settings say since."""
        query = (
            select(sessions.c.model, func.count())
            .where(sessions.c.ended_at.is_(None))
            .group_by(sessions.c.model)
        )
        async with self._tx(write=False) as s:
            return {str(model): int(count) for model, count in (await s.execute(query)).all()}

    async def message_counts(self, session_id: str) -> tuple[int, int]:
        """(active, archived) message counts of the session."""
        stmt = select(
            func.coalesce(func.sum(case((messages.c.active, 1), else_=0)), 0),
            func.coalesce(func.sum(case((messages.c.compacted, 1), else_=0)), 0),
        ).where(messages.c.session_id == session_id)
        async with self._tx(write=False) as s:
            active, archived = (await s.execute(stmt)).one()
            return int(active), int(archived)

    async def load_context_state(self, session_id: str) -> ContextState:
        async with self._tx(write=False) as s:
            data = (
                await s.execute(select(sessions.c.context_state).where(sessions.c.id == session_id))
            ).one_or_none()
            if data is None:
                raise NotFound(f"no session {session_id}")
            return state_from_json(data[0])

    async def save_context_state(self, session_id: str, state: ContextState) -> None:
        """Persist compression bookkeeping: one UPDATE (the row's ``version`` moves on, as any
        update of it does), one thread hop on a SQLite file."""
        values = state_values(session_id, state)
        await self._db.write_at_once(lambda conn: save_state_in(conn, values))
