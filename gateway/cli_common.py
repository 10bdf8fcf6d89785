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
from sqlalchemy.engine import make_url

from agent.errors import ConfigError, HygieiaError
from gateway.config import Settings, load_settings
from gateway.store.db import Database
from gateway.store.repository import Store

T = TypeVar("T")

err = Console(stderr=True)
# Piped output is read by people too (and grepped): do not fold tables to 80 columns there.
out = Console(width=None if sys.stdout.isatty() else 160)


def settings_or_exit() -> Settings:
    """Load the settings; a bad value ends the command with one clear line, not a traceback."""
    try:
        return load_settings()
    except ConfigError as exc:
        err.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None


def run_async(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run one coroutine to completion; a HygieiaError becomes one line and exit code 1."""
    try:
        return asyncio.run(coro_fn())
    except HygieiaError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    """A connected store on the configured database (not migrated: `hygieia migrate` does that)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.resolved_database_url)
    await db.connect()
    try:
        yield Store(db)
    finally:
        await db.dispose()


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
