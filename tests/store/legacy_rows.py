"""Rows written into an older schema revision, for the tests of a migration (the models describe head).

Only columns every revision since 0001 has, so a test can fill a database at any revision.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

SESSIONS = sa.table(
    "sessions",
    *(sa.column(c) for c in ("id", "key", "platform", "chat_id", "system_prompt", "model", "version")),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("last_activity_at", sa.DateTime(timezone=True)),
)
MESSAGES = sa.table(
    "messages",
    *(sa.column(c) for c in ("session_id", "seq", "role", "text")),
    sa.column("content", sa.JSON()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


async def add_session(s: AsyncSession, session_id: str, at: datetime) -> None:
    """A Telegram session ``session_id`` (key ``telegram:1``)."""
    values: dict[str, Any] = {"key": "telegram:1", "platform": "telegram", "chat_id": "1"}
    values.update(system_prompt="", model="m", version=1, created_at=at, last_activity_at=at)
    await s.execute(sa.insert(SESSIONS).values(id=session_id, **values))


async def add_message(
    s: AsyncSession, session_id: str, seq: int, text: str, content: list[dict[str, Any]], at: datetime
) -> None:
    """A user message with ``text`` and ``content`` as that revision stored them."""
    await s.execute(
        sa.insert(MESSAGES).values(
            session_id=session_id, seq=seq, role="user", text=text, content=content, created_at=at
        )
    )
