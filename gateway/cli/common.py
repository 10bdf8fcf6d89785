"""Helpers every ``hygieia`` subcommand shares: settings, the event loop, the store, output."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from agent.errors import ConfigError, HygieiaError, StoreError
from gateway.config import Settings, load_settings
from gateway.store.db import Database
from gateway.store.migrate import current_revision, head_revision
from gateway.store.repository import Store

T = TypeVar("T")

err = Console(stderr=True, soft_wrap=True)  # an error stays on one line, whatever the width
# Piped output is read by people too (and grepped): do not fold tables to 80 columns there.
out = Console(width=None if sys.stdout.isatty() else 160)


def settings_or_exit() -> Settings:
    """Load the settings; a bad value ends the command with one clear line, not a traceback."""
    try:
        return load_settings()
    except ConfigError as exc:
        err.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None


class DetailedError(HygieiaError):
    """An error whose one line is followed by ``details``, one per line (the candidates of an
    ambiguous id, say)."""

    def __init__(self, message: str, details: list[str]) -> None:
        super().__init__(message)
        self.details = details


def run_async(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run one coroutine to completion; a HygieiaError or a database error becomes one line and exit 1."""
    try:
        return asyncio.run(coro_fn())
    except DetailedError as exc:
        err.print(f"[red]error:[/red] {escape(first_line(exc))}", highlight=False)
        for line in exc.details:
            err.print(f"  {escape(line)}", highlight=False)
        raise typer.Exit(1) from None
    except HygieiaError as exc:
        err.print(f"[red]error:[/red] {first_line(exc)}", highlight=False)
        raise typer.Exit(1) from None
    except SQLAlchemyError as exc:
        err.print(
            f"[red]database error:[/red] {first_line(getattr(exc, 'orig', None) or exc)}", highlight=False
        )
        raise typer.Exit(1) from None


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (SQLAlchemy's run to several, with the SQL)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    """A connected store on the configured database (not migrated: `hygieia migrate` does that)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    await require_current_schema(settings.resolved_database_url)
    db = Database(settings.resolved_database_url)
    await db.connect()
    try:
        yield Store(db)
    finally:
        await db.dispose()


async def require_current_schema(url: str) -> None:
    """StoreError (one line: run `hygieia migrate`) unless the database is at this version's schema."""
    current, head = await current_revision(url), head_revision()
    if current is None:
        raise StoreError(f"the database {safe_url(url)} has no schema yet: run `hygieia migrate` first")
    if current != head:
        raise StoreError(
            f"the database {safe_url(url)} is at schema {current}, this version needs {head}: "
            "run `hygieia migrate`"
        )


def safe_url(url: str) -> str:
    """The database URL without its password, for printing."""
    return make_url(url).render_as_string(hide_password=True)


def print_json(value: Any) -> None:
    """Machine output: one JSON document on stdout (datetimes as ISO 8601)."""
    typer.echo(json.dumps(value, default=_json_default, ensure_ascii=False, indent=2))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def when(value: datetime | None) -> str:
    """A short human timestamp in UTC ("-" for none)."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
