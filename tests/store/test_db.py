"""The Database wrapper: lifecycle, SQLite pragmas and write locking, UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql, sqlite

from agent.errors import ConfigError, StoreError
from agent.types import ChatMessage
from gateway.store.columns import UTCDateTime
from gateway.store.db import SQLITE_CACHE_KIB, SQLITE_MMAP_BYTES, Database
from gateway.store.repository import Store
from tests.store.helpers import new_session


def test_unsupported_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        Database("mysql+aiomysql://x@localhost/db")
    with pytest.raises(ConfigError):
        Database("not a url")


def test_engine_before_connect_is_refused() -> None:
    with pytest.raises(StoreError, match="connect"):
        _ = Database("sqlite+aiosqlite:///x.db").engine


async def test_unreachable_database_is_a_store_error() -> None:
    db = Database("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(StoreError, match="cannot connect"):
        await db.connect()


async def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(database: Database) -> None:
    if database.dialect != "sqlite":
        pytest.skip("SQLite pragmas")
    async with database.engine.connect() as conn:
        values = [
            (await conn.execute(text(f"PRAGMA {p}"))).scalar()
            for p in ("journal_mode", "foreign_keys", "busy_timeout")
        ]
    assert values == ["wal", 1, 15000]


async def test_sqlite_connections_map_the_file_and_keep_a_bigger_page_cache(database: Database) -> None:
    if database.dialect != "sqlite":
        pytest.skip("SQLite pragmas")
    async with database.engine.connect() as conn:
        values = [(await conn.execute(text(f"PRAGMA {p}"))).scalar() for p in ("mmap_size", "cache_size")]
    assert values == [SQLITE_MMAP_BYTES, -SQLITE_CACHE_KIB]


async def test_sqlite_write_transactions_take_the_lock_at_begin(store: Store) -> None:
    if store.db.dialect != "sqlite":
        pytest.skip("SQLite locking")
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith("BEGIN"):
            seen.append(statement)

    store.db.listen("before_cursor_execute", record)
    try:
        sid = await new_session(store)
        seen.clear()
        await store.append_message(sid, ChatMessage.user("x"))
        await store.load_active(sid)
    finally:
        store.db.unlisten("before_cursor_execute", record)
    assert seen == ["BEGIN IMMEDIATE", "BEGIN"]


def test_utc_datetime_normalizes_to_utc() -> None:
    column = UTCDateTime()
    lite, postgres = _dialect("sqlite"), _dialect("postgresql")
    plus_two = datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert column.process_bind_param(plus_two, lite) == datetime(2026, 1, 1, 10, 0)
    assert column.process_bind_param(plus_two, postgres) == datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    assert column.process_bind_param(datetime(2026, 1, 1), postgres) == datetime(2026, 1, 1, tzinfo=UTC)
    assert column.process_result_value(datetime(2026, 1, 1), lite) == datetime(2026, 1, 1, tzinfo=UTC)


def _dialect(name: str) -> Any:
    return sqlite.dialect() if name == "sqlite" else postgresql.dialect()  # type: ignore[no-untyped-call]
