"""The hot path of a turn: what the gateway stores between the inbox and the agent's call.

One transaction claims the turn's inbox items, reads the key's session, appends the messages,
touches the session, reads its compression state and gives the active view (from memory while
its version is current), where separate calls took a transaction each and read the whole view
again. On a SQLite file it runs whole in one worker-thread call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, update
from sqlalchemy.exc import IntegrityError

from agent.errors import NotFound, StoreError, WriteConflict
from agent.types import ChatMessage, ContextState
from gateway.store.base import CONFLICT_RETRIES, Repo
from gateway.store.convert import state_from_json, to_session
from gateway.store.inbox_ops import claim_in
from gateway.store.message_ops import append_row, prepared, read_active
from gateway.store.models import sessions
from gateway.store.records import InboxRecord, SessionInfo
from gateway.store.session_ops import CURRENT_SESSION, SessionOpening, open_in
from gateway.store.view_cache import with_estimate

_Appended = tuple[str, int, list[tuple[ChatMessage, bool]], list[ChatMessage], ContextState, bool]

# Built once: on the hot path building a statement costs more than SQLite running it.
_TOUCH = (
    update(sessions)
    .where(sessions.c.id == bindparam("sid"))
    .values(
        view_version=sessions.c.view_version + 1,
        last_activity_at=bindparam("at", type_=sessions.c.last_activity_at.type),
        version=sessions.c.version + 1,
    )
    .returning(sessions.c.view_version, sessions.c.context_state)
)


@dataclass(frozen=True, slots=True)
class AppendedTurn:
    """What :meth:`TurnOps.append_turn` stored and read."""

    stored: list[tuple[ChatMessage, bool]]
    """Each message as stored, and whether it is new (False: its platform id was stored before)."""
    view: list[ChatMessage]
    """The active view after the appends, in order."""
    state: ContextState
    """The session's compression bookkeeping, read in the same transaction."""


ClaimPlan = Callable[[list[InboxRecord], SessionInfo], Sequence[ChatMessage] | None]
"""Given the claimed items and the key's session, the messages to append in the claim's
transaction, or None to append nothing. A pure function: it may run in a worker thread."""

ClaimOpening = Callable[[list[InboxRecord]], SessionOpening | None]
"""Given the claimed items of a key that has no session yet, how to open it in the claim's
transaction (None: leave it to the general path). A pure function, as :data:`ClaimPlan`."""


@dataclass(frozen=True, slots=True)
class TurnClaim:
    """One key's claim: the items taken, the key's current session, and what the plan appended."""

    items: list[InboxRecord]
    session: SessionInfo | None
    """The key's current session (None: it has none yet, or nothing was claimed)."""
    appended: AppendedTurn | None
    """The items' messages as the plan appended them (None: it appended nothing)."""


class TurnOps(Repo):
    async def claim_turn(
        self,
        *,
        worker: str,
        lease_seconds: float,
        session_key: str,
        limit: int = 50,
        plan: ClaimPlan | None = None,
        opening: ClaimOpening | None = None,
        at: datetime | None = None,
    ) -> TurnClaim:
        """:meth:`~gateway.store.inbox_ops.InboxOps.inbox_claim` for one key, the key's current
        session and, when ``plan`` returns messages for them, their append (as :meth:`append_turn`,
        at ``at``), in one transaction: on a SQLite file one worker-thread call, where a statement
        each would be a thread hop each. A key with no session yet gets one there when
        ``opening`` says how (a chat's first message costs no transaction more than the next).
        Losing a race on the append or the new session raises :class:`~agent.errors.WriteConflict`
        (nothing was claimed: claim again)."""
        dialect = self.db.dialect

        def work(conn: Connection) -> tuple[list[InboxRecord], SessionInfo | None, _Appended | None]:
            items = claim_in(
                conn,
                dialect,
                worker=worker,
                lease_seconds=lease_seconds,
                session_key=session_key,
                limit=limit,
                now=self._clock(),
            )
            if not items:
                return items, None, None
            row = conn.execute(CURRENT_SESSION, {"key": session_key}).first()
            info = None if row is None else to_session(row)
            new_session = None if info is not None or opening is None else opening(items)
            if new_session is not None:
                info = open_in(conn, new_session)
            new = None if info is None or plan is None else plan(items, info)
            if info is None or new is None:
                return items, info, None
            return (
                items,
                info,
                (info.id, *self.append_in(conn, info.id, [prepared(m) for m in new], at or self._clock())),
            )

        try:
            items, info, appended = await self.db.write_at_once(work)
        except IntegrityError as exc:
            raise WriteConflict(f"lost a race writing to the session of {session_key}") from exc
        if appended is None:
            return TurnClaim(items, info, None)
        sid, version, stored, view, state, cached = appended
        return TurnClaim(
            items, info, AppendedTurn(stored, self._keep(sid, version, stored, view, cached), state)
        )

    async def append_turn(self, session_id: str, new: Sequence[ChatMessage], *, at: datetime) -> AppendedTurn:
        """Append ``new`` (idempotent on platform message ids, in order), set the session's last
        activity to ``at``, and return the resulting active view and compression state, all in
        one transaction."""
        ready = [prepared(m) for m in new]
        for _ in range(CONFLICT_RETRIES):
            try:
                version, stored, view, state, cached = await self.db.write_at_once(
                    lambda conn: self.append_in(conn, session_id, ready, at)
                )
            except IntegrityError:
                continue  # lost a race we did not lock against: read the new state and try again
            return AppendedTurn(stored, self._keep(session_id, version, stored, view, cached), state)
        raise StoreError(f"could not append to session {session_id}: too many concurrent writers")

    def append_in(
        self, conn: Connection, session_id: str, ready: list[ChatMessage], at: datetime
    ) -> tuple[int, list[tuple[ChatMessage, bool]], list[ChatMessage], ContextState, bool]:
        """The append inside ``conn``'s transaction: the new view version, each message with
        whether it was new, the resulting view, the state, and whether the view came from memory
        (then :meth:`_keep` extends the cached one after the commit instead of replacing it)."""
        # Locks the row (see message_ops.lock_view) and reads the state with it; ``version``
        # moves on too: this is an update of the row (optimistic locking).
        row = conn.execute(_TOUCH, {"sid": session_id, "at": at}).one_or_none()
        if row is None:
            raise NotFound(f"no session {session_id}")
        version, state = int(row[0]), state_from_json(row[1])
        stored = [append_row(conn, session_id, m) for m in ready]
        view = self._views.get(session_id, version - 1)
        if view is None:
            return version, stored, read_active(conn, session_id), state, False
        view += [with_estimate(m) for m, created in stored if created]
        return version, stored, view, state, True

    def _keep(
        self,
        session_id: str,
        version: int,
        stored: list[tuple[ChatMessage, bool]],
        view: list[ChatMessage],
        cached: bool,
    ) -> list[ChatMessage]:
        """After the commit: the memory's view at ``version``. One that came from memory is
        extended by what was appended (a pass over the new messages, not the whole view)."""
        if not cached:
            return self._views.put(session_id, version, view)
        self._views.advance(session_id, version, [m for m, created in stored if created])
        return view
