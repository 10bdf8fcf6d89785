"""The SQLite log is checkpointed beside the writers, never inside a commit."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from sqlalchemy import text

from gateway.store.db import Database

PAGE = 4096


async def _write_pages(db: Database, commits: int) -> None:
    """``commits`` write transactions of about three pages each (one thread hop apiece)."""
    async with db.transaction() as s:
        await s.execute(text("CREATE TABLE IF NOT EXISTS filler (data BLOB)"))
    for _ in range(commits):
        await db.write_at_once(
            lambda conn: conn.execute(text("INSERT INTO filler VALUES (randomblob(:n))"), {"n": 3 * PAGE})
        )


def _log_frames(path: Path) -> tuple[int, int]:
    """(frames in the log, frames copied) as a PASSIVE checkpoint from another connection sees them."""
    with sqlite3.connect(path) as conn:
        _, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(frames), int(copied)


async def test_no_commit_checkpoints_the_log_however_long_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    db = Database(f"sqlite+aiosqlite:///{path}", checkpoint_seconds=3600)
    await db.connect()
    try:
        await _write_pages(db, 600)  # ~2,000 pages: twice SQLite's automatic checkpoint
        frames, _ = await asyncio.to_thread(_log_frames, path)
    finally:
        await db.dispose()
    assert frames > 1500


async def test_the_log_is_checkpointed_in_the_background_soon_after_commits(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    db = Database(f"sqlite+aiosqlite:///{path}", checkpoint_seconds=0.05)
    await db.connect()
    try:
        await _write_pages(db, 100)
        for _ in range(100):
            await asyncio.sleep(0.05)
            frames, copied = await asyncio.to_thread(_log_frames, path)
            if frames == copied:
                break
        checkpointer = db._checkpoints
        assert checkpointer is not None and checkpointer.runs >= 1
    finally:
        await db.dispose()
    assert frames == copied


async def test_the_log_restarts_small_once_checkpointed(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    db = Database(f"sqlite+aiosqlite:///{path}", checkpoint_seconds=0.01)
    await db.connect()
    try:
        for _ in range(5):
            await _write_pages(db, 200)
            await asyncio.sleep(0.2)  # the checkpoint copies the log; the next writer starts it over
        await _write_pages(db, 1)
        frames, _ = await asyncio.to_thread(_log_frames, path)
    finally:
        await db.dispose()
    assert frames < 1000


def test_checkpoints_follow_the_database_into_a_new_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    db = Database(f"sqlite+aiosqlite:///{path}", checkpoint_seconds=0.01)

    async def write_and_wait() -> int:
        await _write_pages(db, 20)
        for _ in range(200):
            await asyncio.sleep(0.01)
            if db._checkpoints is not None and db._checkpoints.runs:
                return db._checkpoints.runs
        return 0

    async def first() -> int:
        await db.connect()
        return await write_and_wait()

    async def second() -> int:
        try:
            assert db._checkpoints is not None
            db._checkpoints.runs = 0
            return await write_and_wait()
        finally:
            await db.dispose()

    assert asyncio.run(first()) >= 1
    assert asyncio.run(second()) >= 1


async def test_closing_waits_for_a_checkpoint_still_running_in_its_thread(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    db = Database(f"sqlite+aiosqlite:///{path}", checkpoint_seconds=3600)
    await db.connect()
    try:
        for _ in range(5):
            checkpointer = db._checkpoints
            assert checkpointer is not None
            await _write_pages(db, 300)  # ~1,000 pages for the checkpoint to copy while close runs
            running = asyncio.create_task(asyncio.to_thread(checkpointer.checkpoint))
            await asyncio.sleep(0)
            await checkpointer.close()  # crashed the process when it closed the connection in use
            await running
    finally:
        await db.dispose()
