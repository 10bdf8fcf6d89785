"""Checkpoints of a SQLite file's write-ahead log, run beside the writers instead of inside them.

SQLite's automatic checkpoint runs in the commit that takes the log past 1,000 pages: that
commit copies the log into the database file and syncs it, several milliseconds once every
hundred turns or so, which made the p99 of a turn's overhead (docs/measured.md). So the
service's connections turn it off, and this runs a PASSIVE checkpoint (it never waits for,
nor blocks, a reader or a writer) on a connection and thread of its own, at most once per
``interval`` while there are new commits. The log then stays small, as with the automatic
checkpoint: a writer starts it over from the beginning once a checkpoint has copied it all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from typing import Literal

_log = logging.getLogger(__name__)

INTERVAL_SECONDS = 1.0

CheckpointMode = Literal["PASSIVE", "TRUNCATE"]


class WalCheckpoints:
    """Background PASSIVE checkpoints of the SQLite file at ``path``; :meth:`wrote` after commits."""

    def __init__(self, path: str, *, interval: float = INTERVAL_SECONDS, busy_timeout_ms: int = 0) -> None:
        self._path = path
        self._interval = interval
        self._busy_timeout_ms = busy_timeout_ms
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: sqlite3.Connection | None = None
        # A cancelled checkpoint still finishes in its thread: closing waits for it (a sqlite3
        # connection used by two threads at once crashes the process).
        self._conn_lock = threading.Lock()
        self._closed = False
        self.runs = 0

    def wrote(self) -> None:
        """A write transaction committed (call on the event loop): a checkpoint follows soon."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            # First commit, or a new event loop (a task and an event belong to the loop they ran on).
            self._dirty = asyncio.Event()
            self._closed = False
            self._task = loop.create_task(self._run(), name="wal-checkpoints")
        self._dirty.set()

    async def close(self) -> None:
        """Stop; SQLite checkpoints what is left when the last connection closes."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.to_thread(self._close_connection)

    def _close_connection(self) -> None:
        with self._conn_lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self._interval)  # one checkpoint for the commits of a while
            self._dirty.clear()
            try:
                busy, frames, copied = await asyncio.to_thread(self.checkpoint)
            except sqlite3.Error as exc:
                _log.warning("WAL checkpoint failed, trying again after the next commit: %s", exc)
                continue
            self.runs += 1
            if busy or copied < frames:
                # A reader still uses part of the log; the next round copies the rest.
                _log.debug("WAL checkpoint partial: %d of %d frames", copied, frames)

    def checkpoint(self, mode: CheckpointMode = "PASSIVE") -> tuple[int, int, int]:
        """One checkpoint, in the calling thread: (busy, frames in the log, frames copied); nothing
        once closed. ``TRUNCATE`` (an erasure's, the daily upkeep's) waits for readers up to the
        busy timeout and empties the log file; checkpoints of this process never overlap."""
        with self._conn_lock:
            if self._closed:
                return 0, 0, 0
            if self._conn is None:
                self._conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
                self._conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            row = self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        return int(row[0]), int(row[1]), int(row[2])
