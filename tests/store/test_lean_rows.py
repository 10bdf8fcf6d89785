"""A plain message's text is stored once; every other content is kept whole, before and after 0014."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import command

from agent.types import ChatMessage, SearchFilters
from gateway.store.db import Database
from gateway.store.migrate import alembic_config, upgrade_to, upgrade_to_head
from gateway.store.models import messages
from gateway.store.repository import Store
from tests.store.helpers import new_session
from tests.store.legacy_rows import add_message, add_session

SID = "s" * 32
# (content, text column) as revision 0013 stored them; only the first is one plain text block.
ROWS: list[tuple[list[dict[str, Any]], str]] = [
    ([{"type": "text", "text": "plain words, stored once"}], "plain words, stored once"),
    ([{"type": "text", "text": "cached"}], "cached"),
    ([{"type": "text", "text": "two"}, {"type": "text", "text": "blocks"}], "two\nblocks"),
    ([{"type": "text", "text": "kept", "cache_control": {"type": "ephemeral"}}], "kept"),
    ([{"type": "text", "text": "the JSON says this"}], "but the text column says that"),
    ([{"type": "tool_use", "id": "t1", "name": "recall", "input": {}}], "[tool recall] {}"),
    ([], ""),
]
PLAIN = {0, 1}


async def _raw_contents(db: Database) -> list[Any]:
    async with db.transaction() as s:
        rows = await s.execute(sa.select(messages.c.content).order_by(messages.c.seq))
        return [r[0] for r in rows]


async def test_a_plain_text_message_keeps_its_text_once_and_reads_back_whole(store: Store) -> None:
    sid = await new_session(store)
    stored = await store.append_message(sid, ChatMessage.user("hello there"))
    assert await _raw_contents(store.db) == [None]
    assert (await store.get_message(stored.id or 0)).content == [{"type": "text", "text": "hello there"}]
    assert [m.content for m in await store.messages_after(sid, 0)] == [
        [{"type": "text", "text": "hello there"}]
    ]


async def test_any_other_content_is_stored_whole(store: Store) -> None:
    sid = await new_session(store)
    blocks = [
        [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        [{"type": "text", "text": "c", "cache_control": {"type": "ephemeral"}}],
        [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}],
    ]
    for content in blocks:
        await store.append_message(sid, ChatMessage(role="user", content=content))
    assert await _raw_contents(store.db) == blocks
    assert [m.content for m in await store.messages_after(sid, 0)] == blocks


async def test_an_edit_of_a_plain_message_keeps_its_first_version(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("first", platform_message_id="m1"))
    edited = [{"type": "text", "text": "second"}]
    await store.record_edit(sid, "m1", edited, at=datetime.now(UTC))
    async with store.db.transaction() as s:
        row = (await s.execute(sa.select(messages.c.content, messages.c.original_content))).one()
    assert row == (None, [{"type": "text", "text": "first"}])
    assert [m.content for m in await store.load_active(sid)] == [edited]


async def _populate_at_0013(url: str) -> None:
    await upgrade_to(url, "0013_ratelimits")
    now = datetime(2026, 11, 1, tzinfo=UTC)
    async with Database(url) as db, db.transaction() as s:
        await add_session(s, SID, now)
        for seq, (content, text) in enumerate(ROWS, start=1):
            await add_message(s, SID, seq, text, content, now)


async def test_the_upgrade_stores_plain_texts_once_and_every_message_reads_as_before(db_url: str) -> None:
    await _populate_at_0013(db_url)
    await upgrade_to_head(db_url)
    async with Database(db_url) as db:
        raw = await _raw_contents(db)
        assert [i for i, c in enumerate(raw) if c is None] == sorted(PLAIN)
        assert [m.content for m in await Store(db).messages_after(SID, 0)] == [c for c, _ in ROWS]


async def test_the_downgrade_gives_every_row_its_content_back(db_url: str) -> None:
    await _populate_at_0013(db_url)
    await upgrade_to_head(db_url)
    await asyncio.to_thread(command.downgrade, alembic_config(db_url), "0013_ratelimits")
    async with Database(db_url) as db:
        raw = await _raw_contents(db)
    assert [json.loads(c) if isinstance(c, str) else c for c in raw] == [c for c, _ in ROWS]


async def test_a_substring_is_found_in_the_text_not_merely_its_trigrams(store: Store) -> None:
    sid = await new_session(store)
    for text in ("abcXbcd and nothing else", "xxabcdyy", "ГРОМКОГОВОРИТЕЛЬ на столе"):
        await store.append_message(sid, ChatMessage.user(text))
    assert [h.seq for h in await store.search("abcd", SearchFilters())] == [2]
    assert [h.seq for h in await store.search("громкогов", SearchFilters())] == [3]
    assert [h.seq for h in await store.search("bcd -abcd", SearchFilters())] == [1]
