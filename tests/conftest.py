"""Shared fixtures: a database per test on every available engine, migrated by Alembic.

SQLite always; PostgreSQL too when ``HYGIEIA_TEST_POSTGRES_URL`` is set (e.g.
``postgresql+psycopg://postgres@127.0.0.1:5432/test``). Each PostgreSQL test gets its
own schema (selected through ``search_path``). A test that asks for ``database`` (``store``)
gets one migrated by an earlier test of this worker and emptied since (rows deleted, sequences
restarted; building the schema costs PostgreSQL ~0.4 s, emptying it ~0.05 s); a schema whose
shape a test changed is dropped instead. Every other schema is dropped afterwards.
"""

from __future__ import annotations

import asyncio
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
from gateway.store.models import Base
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


_PG_SPARE: list[str] = []
"""Schemas of this worker at head and empty, waiting for the next test that asks for ``database``."""
_PG_SHAPE: dict[str, tuple[str, ...]] = {}
"""A migrated schema's shape (tables, columns, indexes, version) when it was built, by schema."""

_SHAPE_SQL = """
SELECT 'c ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' '
       || coalesce(column_default, '')
  FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL SELECT 'i ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
UNION ALL SELECT 't ' || tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
  WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
UNION ALL SELECT 'v ' || version_num FROM alembic_version
ORDER BY 1
"""


def _schema_url(schema: str) -> str:
    assert POSTGRES_URL is not None
    url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


async def _shape(url: str) -> tuple[str, ...]:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return tuple((await conn.execute(text(_SHAPE_SQL))).scalars().all())
    finally:
        await engine.dispose()


async def _emptied(schema: str) -> bool:
    """Delete every row and restart every sequence of a migrated schema whose shape is the one it
    was built with; False (nothing done) when a test changed its shape or it cannot be emptied."""
    url = _schema_url(schema)
    if schema not in _PG_SHAPE or await _shape(url) != _PG_SHAPE[schema]:
        return False
    order = [table.name for table in reversed(Base.metadata.sorted_tables)]
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("SET LOCAL lock_timeout = '5s'"))
            present = set(
                (
                    await conn.execute(
                        text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
                    )
                )
                .scalars()
                .all()
            )
            present.discard("alembic_version")
            tables = [name for name in order if name in present] + sorted(present - set(order))
            sequences = (
                (
                    await conn.execute(
                        text("SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema()")
                    )
                )
                .scalars()
                .all()
            )
            statements = [f'DELETE FROM "{name}"' for name in tables]
            statements += [f'ALTER SEQUENCE "{name}" RESTART' for name in sequences]
            await conn.exec_driver_sql("; ".join(statements))
    except Exception:
        return False
    finally:
        await engine.dispose()
    return True


@pytest.fixture(params=engine_params())
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of an EMPTY database of each available engine (not migrated, unless the test asks
    for ``database``: then possibly already at head, see the module's docstring)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'hygieia.db'}"
        return
    reusable = "database" in request.fixturenames
    if reusable and _PG_SPARE:
        schema = _PG_SPARE.pop()
    else:
        schema = f"test_{uuid.uuid4().hex[:16]}"
        await _postgres_schema("CREATE", schema)
    try:
        yield _schema_url(schema)
    finally:
        if reusable and await _emptied(schema):
            _PG_SPARE.append(schema)
        else:
            _PG_SHAPE.pop(schema, None)
            await _postgres_schema("DROP", schema)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the spare schemas of this worker."""
    if _PG_SPARE:

        async def drop_all() -> None:
            for schema in _PG_SPARE:
                await _postgres_schema("DROP", schema)

        asyncio.run(drop_all())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The multi-process cluster tests run one at a time on one xdist worker (``--dist
    loadgroup``): each starts several ``hygieia run`` processes and measures failover bounds."""
    for item in items:
        if item.get_closest_marker("cluster") is not None:
            item.add_marker(pytest.mark.xdist_group("cluster"))


_SQLITE_TEMPLATE: dict[str, Path] = {}


def _schema_of(url: str) -> str | None:
    """The schema of a URL made by ``db_url`` (``-csearch_path=<schema>``), else None."""
    options = make_url(url).query.get("options")
    if isinstance(options, str) and options.startswith("-csearch_path=test_"):
        return options.removeprefix("-csearch_path=")
    return None


async def migrated(url: str, tmp_root: Path) -> None:
    """Bring ``url`` to head; SQLite copies a database migrated once per test run (same schema, faster)."""
    db_path = make_url(url).database
    if make_url(url).get_backend_name() != "sqlite" or not db_path:
        schema = _schema_of(url)
        if schema is not None and schema in _PG_SHAPE:
            return  # a spare schema, already at head
        await upgrade_to_head(url)
        if schema is not None:
            _PG_SHAPE[schema] = await _shape(url)
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
