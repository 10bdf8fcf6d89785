"""Alembic environment: async engines, URL from the caller or the environment.

The URL is taken, in order, from ``config.attributes["sqlalchemy.url"]`` (set by
:func:`gateway.store.migrate.alembic_config`), the ``sqlalchemy.url`` main option,
``HYGIEIA_DATABASE_URL``, and finally the service's own default (SQLite under
``HYGIEIA_DATA_DIR``).
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from gateway.store.db import configure_sqlite, parse_url
from gateway.store.models import Base

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata

# Built by the migrations but not described by the models (they cannot say it): the FTS5
# tables, their shadow tables and source view on SQLite; the tsvector column and the search
# indexes (expressions, pg_trgm) on PostgreSQL.
IGNORED_TABLE_PREFIX = "messages_fts"
IGNORED_COLUMNS = {("messages", "text_tsv"), ("messages", "cjk_tsv")}
IGNORED_INDEXES = {"ix_messages_text_tsv", "ix_messages_cjk_tsv", "ix_messages_text_trgm"}


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    if type_ == "table" and name is not None:
        return not name.startswith(IGNORED_TABLE_PREFIX)
    if type_ == "column":
        return (parent_names.get("table_name"), name) not in IGNORED_COLUMNS
    if type_ == "index":
        return name not in IGNORED_INDEXES
    return True


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    if type_ == "table" and name is not None and name.startswith(IGNORED_TABLE_PREFIX):
        return False
    if type_ == "column" and (obj.table.name, name) in IGNORED_COLUMNS:
        return False
    return not (type_ == "index" and name in IGNORED_INDEXES)


def database_url() -> str:
    url = config.attributes.get("sqlalchemy.url") or config.get_main_option("sqlalchemy.url")
    url = url or os.environ.get("HYGIEIA_DATABASE_URL")
    if not url:
        from gateway.config import load_settings  # only when nothing else named a database

        url = load_settings().resolved_database_url
    return str(url)


def _configure(connection: Connection | None = None, url: str | None = None) -> None:
    sqlite = connection is not None and connection.dialect.name == "sqlite"
    context.configure(
        connection=connection,
        url=url,
        target_metadata=target_metadata,
        include_name=include_name,
        include_object=include_object,
        render_as_batch=sqlite,
        # Our SQLite connections BEGIN explicitly, so a whole upgrade is one transaction there too.
        transactional_ddl=True if sqlite else None,
        literal_binds=connection is None,
        dialect_opts={"paramstyle": "named"} if connection is None else {},
    )


def run_migrations_offline() -> None:
    """Emit SQL to stdout instead of running it (``alembic upgrade --sql``)."""
    _configure(url=database_url())
    with context.begin_transaction():
        context.run_migrations()


def _run_sync(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_async_engine(parse_url(url), poolclass=NullPool)
    if engine.dialect.name == "sqlite":
        configure_sqlite(engine)  # our own BEGIN makes the whole upgrade one transaction
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_sync)
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # a caller that already holds a sync connection
        _run_sync(connection)
        return
    asyncio.run(_run_async(database_url()))


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
