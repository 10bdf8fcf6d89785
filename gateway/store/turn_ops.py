"""The hot path of a turn: what the gateway stores between the inbox and the agent's call.

One transaction appends the turn's messages, touches the session, reads its compression state
and yields the active view (from memory while its version is current), where separate calls
took a transaction each and read the whole view again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from agent.errors import NotFound, StoreError
from agent.types import ChatMessage, ContextState
from gateway.store.base import CONFLICT_RETRIES, Repo
from gateway.store.columns import utcnow
from gateway.store.convert import state_from_json, to_session
from gateway.store.message_ops import append_row, prepared, read_active
from gateway.store.models import SessionRow, sessions
from gateway.store.queue_ops import claim_in
from gateway.store.records import InboxRecord, SessionInfo


@dataclass(frozen=True, slots=True)
class AppendedTurn:
    """What :meth:`TurnOps.append_turn` stored and read."""

    stored: list[tuple[ChatMessage, bool]]
    """Each message as stored, and whether it is new (False: its platform id was stored before)."""
    view: list[ChatMessage]
    """The active view after the appends, in order."""
    state: ContextState
    """The session's compression bookkeeping, read in the same transaction."""


Prebuild = Callable[[list[InboxRecord], SessionInfo], list[ChatMessage] | None]
"""Given the claimed items and their session, the messages to append in the claim's own
transaction, or None when they need more than that (media, an edit, a command, a reset...)."""


@dataclass(frozen=True, slots=True)
class ClaimedTurn:
    """What :meth:`TurnOps.claim_turn` took and read."""

    items: list[InboxRecord]
    session: SessionInfo | None
    """The key's current session (None: it has none yet, or nothing was claimed)."""
    appended: AppendedTurn | None = None
    """The items' messages, when ``prebuild`` gave them and they were appended in the same transaction."""


class TurnOps(Repo):
    async def claim_turn(
        self,
        *,
        worker: str,
        lease_seconds: float,
        session_key: str,
        limit: int = 50,
        prebuild: Prebuild | None = None,
        at: datetime | None = None,
    ) -> ClaimedTurn:
        """:meth:`~gateway.store.queue_ops.QueueOps.inbox_claim` for one key and, when anything was
        claimed, the key's current session, in one transaction; with ``prebuild``, the messages it
        gives are appended in that transaction too (as :meth:`append_turn` does, at ``at``)."""
        for _ in range(CONFLICT_RETRIES):
            try:
                async with self._tx() as s:
                    items = await claim_in(
                        s,
                        self.db.dialect,
                        worker=worker,
                        lease_seconds=lease_seconds,
                        session_key=session_key,
                        limit=limit,
                    )
                    if not items:
                        return ClaimedTurn([], None)
                    row = await s.scalar(
                        select(SessionRow).where(SessionRow.key == session_key, SessionRow.ended_at.is_(None))
                    )
                    info = None if row is None else to_session(row)
                    new = None if info is None or prebuild is None else prebuild(items, info)
                    if info is None or new is None:
                        return ClaimedTurn(items, info)
                    version, stored, view, state = await self._append_in(
                        s, info.id, [prepared(m) for m in new], at or utcnow()
                    )
            except IntegrityError:
                continue  # lost a race we did not lock against: claim and append again
            appended = AppendedTurn(stored, self._views.put(info.id, version, view), state)
            return ClaimedTurn(items, info, appended)
        raise StoreError(f"could not append to the session of {session_key}: too many concurrent writers")

    async def append_turn(self, session_id: str, new: Sequence[ChatMessage], *, at: datetime) -> AppendedTurn:
        """Append ``new`` (idempotent on platform message ids, in order), set the session's last
        activity to ``at``, and return the resulting active view and compression state, all in
        one transaction."""
        ready = [prepared(m) for m in new]
        for _ in range(CONFLICT_RETRIES):
            try:
                async with self._tx() as s:
                    version, stored, view, state = await self._append_in(s, session_id, ready, at)
            except IntegrityError:
                continue  # lost a race we did not lock against: read the new state and try again
            return AppendedTurn(stored, self._views.put(session_id, version, view), state)
        raise StoreError(f"could not append to session {session_id}: too many concurrent writers")

    async def _append_in(
        self, s: AsyncSession, session_id: str, ready: list[ChatMessage], at: datetime
    ) -> tuple[int, list[tuple[ChatMessage, bool]], list[ChatMessage], ContextState]:
        # Locks the row (see message_ops.lock_view) and reads the state with it; ``version``
        # moves on too: this is an update of the row (optimistic locking).
        stmt = (
            update(sessions)
            .where(sessions.c.id == session_id)
            .values(
                view_version=sessions.c.view_version + 1,
                last_activity_at=at,
                version=sessions.c.version + 1,
            )
            .returning(sessions.c.view_version, sessions.c.context_state)
        )
        row = (await s.execute(stmt)).one_or_none()
        if row is None:
            raise NotFound(f"no session {session_id}")
        version, state = int(row[0]), state_from_json(row[1])
        stored = [await append_row(s, session_id, m) for m in ready]
        view = self._views.get(session_id, version - 1)
        if view is None:
            view = await read_active(s, session_id)
        else:
            view += [m for m, created in stored if created]
        return version, stored, view, state
