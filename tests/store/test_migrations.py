"""The migrations build exactly the models' schema (plus search), and undo cleanly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from agent.errors import StoreError
from gateway.store.db import Database
from gateway.store.migrate import alembic_config, current_revision, head_revision, upgrade_to_head
from gateway.store.models import Base
from gateway.store.repository import Store
from tests.store.helpers import append_turns, new_session, summary_plan

ROOT = Path(__file__).resolve().parents[2]


async def table_names(url: str) -> set[str]:
    async with Database(url) as db, db.engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


async def test_alembic_check_finds_no_difference_with_the_models(db_url: str) -> None:
    await upgrade_to_head(db_url)
    await asyncio.to_thread(command.check, alembic_config(db_url))  # raises on any difference


async def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    await upgrade_to_head(db_url)
    assert await current_revision(db_url) == head_revision()
    assert set(Base.metadata.tables) <= await table_names(db_url)

    await asyncio.to_thread(command.downgrade, alembic_config(db_url), "base")
    assert await current_revision(db_url) is None
    assert await table_names(db_url) <= {"alembic_version"}

    await upgrade_to_head(db_url)
    assert await current_revision(db_url) == head_revision()
    await asyncio.to_thread(command.check, alembic_config(db_url))


async def test_empty_database_has_no_revision(db_url: str) -> None:
    assert await current_revision(db_url) is None


async def test_alembic_ini_at_the_root_points_at_the_migrations(db_url: str) -> None:
    config = Config(
        str(ROOT / "alembic.ini"), attributes={"sqlalchemy.url": db_url, "configure_logger": False}
    )
    await asyncio.to_thread(command.upgrade, config, "head")
    assert await current_revision(db_url) == head_revision()


def _search_objects(conn: Connection) -> set[str]:
    if conn.dialect.name == "sqlite":
        rows = conn.execute(text("SELECT name FROM sqlite_master WHERE name LIKE 'messages_fts%'"))
        return {r[0] for r in rows}
    columns = {c["name"] for c in inspect(conn).get_columns("messages")}
    indexes = {i["name"] for i in inspect(conn).get_indexes("messages")}
    search = {"ix_messages_text_tsv", "ix_messages_cjk_tsv", "ix_messages_text_trgm"}
    return ({"text_tsv", "cjk_tsv"} & columns) | (search & indexes)


async def test_search_objects_are_built_by_the_migration(database: Database) -> None:
    async with database.engine.connect() as conn:
        found = await conn.run_sync(_search_objects)
    if database.dialect == "sqlite":
        assert {"messages_fts", "messages_fts_trgm", "messages_fts_source"} <= found
        assert {"messages_fts_ai", "messages_fts_ad", "messages_fts_au"} <= found
    else:
        assert found == {
            "text_tsv",
            "cjk_tsv",
            "ix_messages_text_tsv",
            "ix_messages_cjk_tsv",
            "ix_messages_text_trgm",
        }


async def test_fts_index_stays_consistent_through_archive_and_restore(store: Store) -> None:
    if store.db.dialect != "sqlite":
        pytest.skip("FTS5 only on SQLite")
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 6)
    await store.archive_and_summarize(sid, summary_plan(msgs[1:4]))
    await store.restore_latest_compaction(sid)
    async with store.db.transaction() as s:
        # Raises "database disk image is malformed" when the index and the table disagree.
        for fts in ("messages_fts", "messages_fts_trgm"):
            await s.execute(text(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)"))
        trigger = await s.scalar(text("SELECT sql FROM sqlite_master WHERE name = 'messages_fts_au'"))
    assert "UPDATE OF text, search_cjk ON messages" in str(trigger)


async def test_upgrade_creates_the_sqlite_directory(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'new' / 'dir' / 'h.db'}"
    await upgrade_to_head(url)
    assert await current_revision(url) == head_revision()


async def test_upgrade_of_an_unreachable_database_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="migration failed"):
        await upgrade_to_head("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
