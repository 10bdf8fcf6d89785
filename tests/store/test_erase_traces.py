"""Erasure leaves no trace a reader of the database can find: the user's ``/compact`` focus text,
and the deleted bytes themselves (SQLite's file; PostgreSQL's table files)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

from agent.types import ChatMessage
from gateway.store.repository import Store
from tests.store.engines import only
from tests.store.helpers import new_session, summary_plan

MARK = "quetzalcoatl"


async def own_dm(store: Store, user: str) -> str:
    info = await store.get_or_create_session(
        f"telegram:dm:{user}", platform="telegram", chat_id=user, user_id=user, system_prompt="s", model="m"
    )
    return info.id


async def compact_with_focus(store: Store, sid: str, author: str, focus: str) -> None:
    said = [
        await store.append_message(sid, ChatMessage.user(f"{author} talks", author_id=author)),
        await store.append_message(sid, ChatMessage.assistant("ok")),
    ]
    await store.append_message(sid, ChatMessage.user(f"{author} goes on", author_id=author))
    plan = dataclasses.replace(summary_plan(said, "the start"), focus=focus)
    await store.archive_and_summarize(sid, plan)


async def test_erasure_clears_the_compact_focus_of_the_users_sessions_and_keeps_others(store: Store) -> None:
    ann = await own_dm(store, "ann")
    group = await new_session(store, "telegram:group:-5", chat_id="-5")
    bob = await own_dm(store, "bob")
    await compact_with_focus(store, ann, "ann", f"keep my {MARK} plans")
    await compact_with_focus(store, group, "ann", f"the {MARK} trip")
    await compact_with_focus(store, bob, "bob", "bob's budget")

    counts = await store.erase_user("telegram", "ann")

    assert counts.focus_texts == 2
    assert [c.focus for c in await store.list_compactions(ann)] == [None]
    assert [c.focus for c in await store.list_compactions(group)] == [None]
    assert [c.focus for c in await store.list_compactions(bob)] == ["bob's budget"]


async def put_inbox(store: Store, n: int) -> None:
    for i in range(n):
        await store.inbox_put(
            platform="telegram",
            chat_id="ann",
            platform_message_id=f"m{i}",
            session_key="telegram:dm:ann",
            payload={"text": f"{MARK} inbox payload number {i}", "user_id": "ann"},
            addressed=True,
        )


@only("sqlite")
async def test_erased_text_cannot_be_read_from_the_sqlite_file(store: Store, db_url: str) -> None:
    sid = await own_dm(store, "ann")
    bob = await own_dm(store, "bob")
    await put_inbox(store, 40)
    for i in range(40):
        await store.append_message(sid, ChatMessage.user(f"{MARK} message {i} " + "x" * 300, author_id="ann"))
        await store.append_message(bob, ChatMessage.user(f"bob keeps line {i}", author_id="bob"))

    await store.erase_user("telegram", "ann")

    path = Path(str(make_url(db_url).database))
    files = [p for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
    found = [p.name for p in files if MARK.encode() in p.read_bytes()]
    assert found == []
    assert b"bob keeps line 39" in b"".join(p.read_bytes() for p in files)


async def tables_holding_the_mark(store: Store) -> list[str]:
    """The PostgreSQL tables whose files on disk still contain the erased word."""
    async with store.db.engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text("CHECKPOINT"))
        found = []
        for table in ("inbox", "messages"):
            raw = await conn.scalar(text(f"SELECT pg_read_binary_file(pg_relation_filepath('{table}'))"))
            if MARK.encode() in bytes(raw):
                found.append(table)
        return found


@only("postgresql")
async def test_erased_text_cannot_be_read_from_the_postgres_table_files(store: Store) -> None:
    sid = await own_dm(store, "ann")
    bob = await own_dm(store, "bob")
    await put_inbox(store, 40)
    for i in range(40):
        await store.append_message(sid, ChatMessage.user(f"{MARK} message {i}", author_id="ann"))
        await store.append_message(bob, ChatMessage.user(f"bob keeps line {i}", author_id="bob"))

    await store.erase_user("telegram", "ann")

    assert await tables_holding_the_mark(store) == []


@only("postgresql")
async def test_erasure_waits_for_an_older_snapshot_before_it_rewrites_the_tables(store: Store) -> None:
    """VACUUM FULL copies a deleted row an older snapshot can still read (another node's transaction)."""
    sid = await own_dm(store, "ann")
    await put_inbox(store, 10)
    for i in range(10):
        await store.append_message(sid, ChatMessage.user(f"{MARK} message {i}", author_id="ann"))

    async with store.db.engine.connect() as reader:
        await reader.execution_options(isolation_level="REPEATABLE READ")
        await reader.execute(text("SELECT 1"))  # a snapshot, and no lock on the erased tables
        erasing = asyncio.create_task(store.erase_user("telegram", "ann"))
        await asyncio.sleep(1.0)
        assert not erasing.done()
        await reader.rollback()
    counts = await asyncio.wait_for(erasing, 30)

    assert counts.messages == 10
    assert await tables_holding_the_mark(store) == []
