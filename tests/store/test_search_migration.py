"""Migration 0003 indexes what a database already held: CJK words, substrings, long messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from agent.types import SearchFilters
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to, upgrade_to_head
from gateway.store.repository import Store
from tests.store.legacy_rows import add_message, add_session

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
        await add_session(s, "s" * 32, now)
        for seq, text in enumerate(BEFORE, start=1):
            content = json.loads(json.dumps([{"type": "text", "text": text}]))
            await add_message(s, "s" * 32, seq, text, content, now)


async def test_an_upgraded_database_finds_cjk_words_and_substrings_it_held_before(db_url: str) -> None:
    await _populate_at_0002(db_url)
    await upgrade_to_head(db_url)
    async with Database(db_url) as db:
        store = Store(db)
        for query, text in [("数据", BEFORE[0]), ("カタカナ", BEFORE[1]), ("UserProfile", BEFORE[2])]:
            hits = await store.search(query, SearchFilters())
            assert [h.seq for h in hits] == [BEFORE.index(text) + 1], query
        assert [h.seq for h in await store.search("english", SearchFilters())] == [4]
