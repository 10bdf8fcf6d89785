"""Sub-agent runs: a session of their own, linked to the chat whose ``delegate`` call ran them."""

from __future__ import annotations

import uuid

from sqlalchemy import insert, select, update

from agent.clock import utcnow
from agent.errors import NotFound
from gateway.store.base import Repo, bump_view
from gateway.store.models import messages, sessions

KEY_ROOM = 255 - len("/delegate/") - 32
"""The parent key is cut to leave room for the suffix in ``sessions.key`` (255 characters)."""


class DelegationOps(Repo):
    async def open_delegation(self, parent_session_id: str, *, model: str, system_prompt: str) -> str:
        """A new session for a sub-agent of ``parent_session_id``, in the same chat; its id."""
        child = uuid.uuid4().hex
        now = utcnow()
        async with self._tx() as s:
            parent = (
                await s.execute(
                    select(
                        sessions.c.key,
                        sessions.c.platform,
                        sessions.c.chat_id,
                        sessions.c.thread_id,
                        sessions.c.user_id,
                    ).where(sessions.c.id == parent_session_id)
                )
            ).one_or_none()
            if parent is None:
                raise NotFound(f"no session {parent_session_id}")
            await s.execute(
                insert(sessions).values(
                    id=child,
                    key=f"{parent.key[:KEY_ROOM]}/delegate/{child}",
                    platform=parent.platform,
                    chat_id=parent.chat_id,
                    thread_id=parent.thread_id,
                    user_id=parent.user_id,
                    system_prompt=system_prompt.replace("\x00", ""),
                    model=model,
                    created_at=now,
                    last_activity_at=now,
                    compaction_count=0,
                    view_version=0,
                    version=1,
                    parent_session_id=parent_session_id,
                )
            )
        return child

    async def close_delegation(self, session_id: str, outcome: str) -> None:
        """End a sub-agent's session and archive its messages: it never shows as a live chat, and
        search (the admin's, the parent chat's ``session_search``) still finds every word."""
        now = utcnow()
        async with self._tx() as s:
            await s.execute(
                update(messages)
                .where(messages.c.session_id == session_id, messages.c.active)
                .values(active=False, compacted=True)
            )
            await bump_view(s, session_id)
            await s.execute(
                update(sessions)
                .where(sessions.c.id == session_id, sessions.c.ended_at.is_(None))
                .values(
                    ended_at=now,
                    end_reason=f"delegation {outcome}"[:64],
                    last_activity_at=now,
                    version=sessions.c.version + 1,
                )
            )

    async def delegations(self, parent_session_id: str) -> list[str]:
        """Ids of the sub-agent sessions a chat's session ran, oldest first."""
        async with self._tx(write=False) as s:
            rows = await s.scalars(
                select(sessions.c.id)
                .where(sessions.c.parent_session_id == parent_session_id)
                .order_by(sessions.c.created_at, sessions.c.id)
            )
            return [str(r) for r in rows]
