"""Wake-ups through PostgreSQL ``LISTEN/NOTIFY``: a worker hears of new work the moment it commits.

The writers send ``pg_notify`` inside the transaction that writes the row (:func:`notify_inbox`,
:func:`notify_outbox`), so a notification arrives only for committed work and never before it.
:class:`Listener` holds one dedicated connection (outside the pool: a pooled connection is
recycled, and with it the ``LISTEN``) in a background task, calls back on each notification, and
reconnects when the connection drops; after each (re)connect it calls ``on_gap`` so that the
caller looks for what was written while nobody listened. Polling stays the slow safety net.

Channels are database-wide: on a database shared by several schemas (tests), a wake-up for
another schema's key finds nothing to claim, which is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

import psycopg
from sqlalchemy import func, select
from sqlalchemy.engine import URL, Connection

_log = logging.getLogger(__name__)

INBOX_CHANNEL = "hygieia_inbox"
OUTBOX_CHANNEL = "hygieia_outbox"
COMMAND_CHANNEL = "hygieia_command"
RECONNECT_SECONDS = (0.5, 1.0, 2.0, 5.0)


def notify_inbox(conn: Connection, session_keys: Iterable[str]) -> None:
    """In the writing transaction: the inbox has new work for these keys (PostgreSQL only)."""
    if conn.dialect.name != "postgresql":
        return
    for key in sorted(set(session_keys)):
        conn.execute(select(func.pg_notify(INBOX_CHANNEL, key)))


def notify_outbox(conn: Connection) -> None:
    """In the writing transaction: a reply is due (PostgreSQL only)."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_notify(OUTBOX_CHANNEL, "")))


def command_payload(session_key: str, action: str) -> str:
    """What a cluster-wide command notification carries: ``<action> <session key>``."""
    return f"{action} {session_key}"


def parse_command(payload: str) -> tuple[str, str] | None:
    """``(action, session key)`` of a command notification; None when it is not one."""
    action, _, key = payload.partition(" ")
    return (action, key) if action and key else None


def conninfo(url: URL) -> str:
    """The libpq URI of a SQLAlchemy ``postgresql+psycopg`` URL (query options kept)."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


class Listener:
    """``LISTEN`` on the channels; ``handlers`` maps a channel to a callback taking the payload."""

    def __init__(
        self, url: URL, handlers: dict[str, Callable[[str], None]], *, on_gap: Callable[[], None]
    ) -> None:
        self._dsn = conninfo(url)
        self._handlers = handlers
        self._on_gap = on_gap
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="notify listener")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as conn:
                    for channel in self._handlers:
                        await conn.execute(f'LISTEN "{channel}"')
                    failures = 0
                    self.connected.set()
                    self._on_gap()  # what was written while nobody listened
                    async for note in conn.notifies():
                        handler = self._handlers.get(note.channel)
                        if handler is not None:
                            try:
                                handler(note.payload)
                            except Exception:  # one bad callback must not stop the wake-ups
                                _log.exception("a wake-up handler failed")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: polling covers the gap meanwhile
                self.connected.clear()
                delay = RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)]
                failures += 1
                _log.warning("notification listener lost its connection (%s); again in %.1fs", exc, delay)
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(delay)
