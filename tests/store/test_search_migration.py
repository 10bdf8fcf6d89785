"""Migration 0003 indexes what a database already held: CJK words, substrings, long messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa

from agent.types import SearchFilters
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to, upgrade_to_head
from gateway.store.repository import Store

# The tables as revision 0002 left them (the models describe head).
_SESSIONS = sa.table(
    "sessions",
    *(sa.column(c) for c in ("id", "key", "platform", "chat_id", "system_prompt", "model", "version")),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("last_activity_at", sa.DateTime(timezone=True)),
)
_MESSAGES = sa.table(
    "messages",
    *(sa.column(c) for c in ("session_id", "seq", "role", "text")),
    sa.column("content", sa.JSON()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)
BEFORE = [
    "我们今天讨论数据库的设计问题。",
    "これはカタカナのテストです",
    "the crash is in getUserProfileById() again",
    "an ordinary english sentence",
]


async def _populate_at_0002(url: str) -> None:
    await upgrade_to(url, "0002_message_edits")
    now = datetime(2026, 11, 1, tzinfo=UTC)
    async with Database(url) as db, db.transaction() as s:
        await s.execute(
            sa.insert(_SESSIONS).values(
                id="s" * 32,
                key="telegram:1",
                platform="telegram",
                chat_id="1",
                system_prompt="",
                model="m",
                version=1,
                created_at=now,
                last_activity_at=now,
            )
        )
        for seq, text in enumerate(BEFORE, start=1):
            content = json.loads(json.dumps([{"type": "text", "text": text}]))
            await s.execute(
                sa.insert(_MESSAGES).values(
                    session_id="s" * 32, seq=seq, role="user", text=text, content=content, created_at=now
                )
            )


async def test_an_upgraded_database_finds_cjk_words_and_substrings_it_held_before(db_url: str) -> None:
    await _populate_at_0002(db_url)
    await upgrade_to_head(db_url)
    async with Database(db_url) as db:
        store = Store(db)
        for query, text in [("数据", BEFORE[0]), ("カタカナ", BEFORE[1]), ("UserProfile", BEFORE[2])]:
            hits = await store.search(query, SearchFilters())
            assert [h.seq for h in hits] == [BEFORE.index(text) + 1], query
        assert [h.seq for h in await store.search("english", SearchFilters())] == [4]
