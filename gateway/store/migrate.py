"""Schema migrations (Alembic), callable from code.

The ``migrations`` package ships with the install, so the configuration is built here
from its location rather than read from ``alembic.ini`` (which serves the ``alembic``
command in a checkout).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

import migrations
from agent.errors import StoreError
from gateway.store.db import Database, parse_url


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config for the installed migrations; ``url`` overrides the environment's."""
    config = Config()
    # __path__ rather than __file__: it also works when the package is found as a namespace
    # (an editable install made before migrations/ had its __init__.py).
    config.set_main_option("script_location", str(Path(next(iter(migrations.__path__)))))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.attributes["sqlalchemy.url"] = url
    return config


def head_revision() -> str | None:
    """The newest revision the code knows."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def pending_revisions(current: str | None) -> list[str]:
    """The revisions an upgrade from ``current`` to head applies, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    newest_first = script.iterate_revisions("heads", current or "base")
    return [rev.revision for rev in reversed(list(newest_first))]


async def upgrade_to_head(url: str) -> None:
    """Bring the database at ``url`` to the newest schema (Alembic runs in a worker thread).

    Raises :class:`StoreError` when the database cannot be reached or the upgrade fails
    (a failed upgrade leaves the previous schema: both engines run it in one transaction).
    """
    await upgrade_to(url, "head")


async def upgrade_to(url: str, revision: str) -> None:
    """Upgrade the database at ``url`` to ``revision`` (see :func:`upgrade_to_head`)."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        await asyncio.to_thread(Path(parsed.database).parent.mkdir, parents=True, exist_ok=True)
    try:
        await asyncio.to_thread(command.upgrade, alembic_config(url), revision)
    except (CommandError, SQLAlchemyError, OSError) as exc:
        raise StoreError(f"database migration failed: {exc}") from exc


async def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at (``None`` for an empty database)."""

    def _read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    db = Database(url)
    await db.connect()
    try:
        async with db.engine.connect() as conn:
            return await conn.run_sync(_read)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read the schema revision: {exc}") from exc
    finally:
        await db.dispose()
