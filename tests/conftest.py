"""Shared fixtures: a database per test on every available engine, migrated by Alembic.

SQLite always; PostgreSQL too when ``HYGIEIA_TEST_POSTGRES_URL`` is set (e.g.
``postgresql+psycopg://postgres@127.0.0.1:5432/test``). Each PostgreSQL test gets its
own schema (selected through ``search_path``), dropped afterwards.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from tests.store.engines import POSTGRES_URL, engine_params


async def _postgres_schema(action: str, schema: str) -> None:
    assert POSTGRES_URL is not None
    engine = create_async_engine(POSTGRES_URL, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f'{action} SCHEMA "{schema}"' + (" CASCADE" if action == "DROP" else "")))
    finally:
        await engine.dispose()


@pytest.fixture(params=engine_params())
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of an EMPTY database of each available engine (not migrated)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'hygieia.db'}"
        return
    assert POSTGRES_URL is not None
    schema = f"test_{uuid.uuid4().hex[:16]}"
    await _postgres_schema("CREATE", schema)
    url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        await _postgres_schema("DROP", schema)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The multi-process cluster tests run one at a time on one xdist worker (``--dist
    loadgroup``): each starts several ``hygieia run`` processes and measures failover bounds."""
    for item in items:
        if item.get_closest_marker("cluster") is not None:
            item.add_marker(pytest.mark.xdist_group("cluster"))


_SQLITE_TEMPLATE: dict[str, Path] = {}


async def migrated(url: str, tmp_root: Path) -> None:
    """Bring ``url`` to head; SQLite copies a database migrated once per test run (same schema, faster)."""
    db_path = make_url(url).database
    if make_url(url).get_backend_name() != "sqlite" or not db_path:
        await upgrade_to_head(url)
        return
    template = _SQLITE_TEMPLATE.get("path")
    if template is None:
        template = tmp_root / "template.db"
        await upgrade_to_head(f"sqlite+aiosqlite:///{template}")
        _SQLITE_TEMPLATE["path"] = template
    shutil.copyfile(template, db_path)


@pytest.fixture
async def database(db_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Database]:
    """A connected :class:`Database` at head (built by the Alembic migrations, not create_all)."""
    await migrated(db_url, tmp_path_factory.getbasetemp())
    db = Database(db_url)
    await db.connect()
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
async def store(database: Database) -> Store:
    """A :class:`Store` over a fresh, migrated database."""
    return Store(database)


@pytest.fixture
async def second(database: Database, db_url: str) -> AsyncIterator[Store]:
    """Another worker's store: its own engine and pool on the same (migrated) database."""
    db = Database(db_url)
    await db.connect()
    try:
        yield Store(db)
    finally:
        await db.dispose()
