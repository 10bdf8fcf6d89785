"""Per-chat overrides an admin set (``admin_overrides``): list, look up for a chat, set, clear.

Validation (known model, budget floor) is the admin's job (gateway.admin.overrides); this
module only keeps rows. ``thread`` None means the whole chat (stored as ``""``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, RowMapping, and_, bindparam, delete, insert, select
from sqlalchemy.exc import IntegrityError

from agent.clock import utcnow
from agent.errors import StoreError
from gateway.store.base import CONFLICT_RETRIES, Repo
from gateway.store.columns import clean_text
from gateway.store.models import admin_overrides

WHOLE_CHAT = ""


@dataclass(frozen=True, slots=True)
class AdminOverride:
    """One admin-set override; a setting left None comes from the config or the service."""

    platform: str
    chat: str
    thread: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    summary_model: str | None = None
    budget_tokens: int | None = None
    tools: dict[str, list[str]] | None = None
    """Globs narrowing the chat's MCP tools: ``{"include": [...], "exclude": [...]}``."""
    updated_at: datetime | None = None
    updated_by: str = ""


def _record(m: RowMapping) -> AdminOverride:
    return AdminOverride(
        platform=m["platform"],
        chat=m["chat"],
        thread=m["thread"] or None,
        system_prompt=m["system_prompt"],
        model=m["model"],
        summary_model=m["summary_model"],
        budget_tokens=m["budget_tokens"],
        tools=m["tools"],
        updated_at=m["updated_at"],
        updated_by=m["updated_by"],
    )


_FOR_CHAT = (
    select(admin_overrides)
    .where(admin_overrides.c.platform == bindparam("platform"), admin_overrides.c.chat == bindparam("chat"))
    .order_by(admin_overrides.c.thread)
)


def overrides_in(conn: Connection, platform: str, chat: str) -> list[AdminOverride]:
    """The chat's admin-set overrides (the whole chat's and each thread's), inside ``conn``'s
    transaction."""
    return [_record(r) for r in conn.execute(_FOR_CHAT, {"platform": platform, "chat": chat}).mappings()]


def _key(platform: str, chat: str, thread: str | None) -> ColumnElement[bool]:
    t = admin_overrides.c
    return and_(t.platform == platform, t.chat == chat, t.thread == (thread or WHOLE_CHAT))


class OverrideOps(Repo):
    async def list_admin_overrides(self) -> list[AdminOverride]:
        """Every admin-set override, by platform, chat and thread."""
        t = admin_overrides.c
        async with self._tx(write=False) as s:
            rows = await s.execute(select(admin_overrides).order_by(t.platform, t.chat, t.thread))
            return [_record(r) for r in rows.mappings()]

    async def admin_overrides_for(self, platform: str, chat: str) -> list[AdminOverride]:
        """The chat's admin-set overrides (the whole chat's and each thread's)."""
        return await self.db.read_at_once(lambda conn: overrides_in(conn, platform, chat))

    async def set_admin_override(self, entry: AdminOverride, *, actor: str) -> AdminOverride | None:
        """Replace the chat's (or thread's) admin override with ``entry``; the previous one, if any."""
        values = {
            "platform": entry.platform,
            "chat": entry.chat,
            "thread": entry.thread or WHOLE_CHAT,
            "system_prompt": clean_text(entry.system_prompt) if entry.system_prompt is not None else None,
            "model": entry.model,
            "summary_model": entry.summary_model,
            "budget_tokens": entry.budget_tokens,
            "tools": entry.tools,
            "updated_at": utcnow(),
            "updated_by": clean_text(actor)[:255],
        }
        for _ in range(CONFLICT_RETRIES):
            try:
                async with self._tx() as s:
                    where = _key(entry.platform, entry.chat, entry.thread)
                    old = (await s.execute(select(admin_overrides).where(where))).mappings().first()
                    await s.execute(delete(admin_overrides).where(where))
                    await s.execute(insert(admin_overrides).values(**values))
                return None if old is None else _record(old)
            except IntegrityError:
                continue  # another admin set it at the same moment: replace theirs
        raise StoreError(f"could not set the override of {entry.platform}:{entry.chat}")

    async def clear_admin_override(
        self, platform: str, chat: str, thread: str | None = None
    ) -> AdminOverride | None:
        """Remove the chat's (or thread's) admin override; what it was, or None when there was none."""
        where = _key(platform, chat, thread)
        async with self._tx() as s:
            old = (await s.execute(select(admin_overrides).where(where))).mappings().first()
            if old is None:
                return None
            await s.execute(delete(admin_overrides).where(where))
        return _record(old)
