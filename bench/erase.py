"""Erasing one user from a database of many messages: the erasure's transaction, and the step that
makes the deleted bytes unreadable (SQLite: FTS merge + WAL truncate; PostgreSQL: VACUUM FULL of the
touched tables), which holds the tables while it runs.

The real store on SQLite in a temp dir (and PostgreSQL when HYGIEIA_TEST_POSTGRES_URL is set):
``SESSIONS`` sessions of chat between several users, the one erased wrote 1% of the messages.

    python bench/erase.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import tempfile
import time
from pathlib import Path

import _root  # noqa: F401  (the checkout's root on sys.path)
from _report import Report
from rich.console import Console
from rich.table import Table
from sqlalchemy import Connection

from agent.types import ChatMessage
from gateway.store import erase_ops
from gateway.store.db import Database
from gateway.store.message_ops import row_values
from gateway.store.migrate import upgrade_to_head
from gateway.store.models import messages
from gateway.store.repository import Store
from tests.turn_probe import scratch_url

SESSIONS = 100
TEXT = "a line of ordinary chat about the garden, the budget and the trip next week " * 4


async def fill(store: Store, per_session: int) -> None:
    for n in range(SESSIONS):
        info = await store.get_or_create_session(
            f"telegram:group:{n}", platform="telegram", chat_id=str(n), system_prompt="s", model="m"
        )
        rows = []
        for i in range(per_session):
            author = "victim" if i % 100 == 7 else f"user{i % 5}"
            message = ChatMessage.user(f"{TEXT} {n}/{i}", author_id=author)
            rows.append({**row_values(info.id, message), "seq": i + 1, "sub_seq": 0})

        def write(conn: Connection, rows: list[dict[str, object]] = rows) -> None:
            conn.execute(messages.insert(), rows)

        await store.db.write_at_once(write)


async def measure(url: str, per_session: int) -> tuple[float, float, int]:
    await upgrade_to_head(url)
    async with Database(url) as db:
        store = Store(db)
        await fill(store, per_session)
        timings: list[float] = []
        log = logging.getLogger(erase_ops.__name__)
        handler = _Reclaimed(timings)
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        try:
            started = time.perf_counter()
            counts = await store.erase_user("telegram", "victim")
            whole = (time.perf_counter() - started) * 1000
        finally:
            log.removeHandler(handler)
    return whole, timings[0] if timings else float("nan"), counts.messages


class _Reclaimed(logging.Handler):
    """Picks the reclaim step's own timing out of its log line (it runs inside erase_user)."""

    def __init__(self, into: list[float]) -> None:
        super().__init__()
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if "reclaimed" in str(record.msg) and isinstance(record.args, tuple) and record.args:
            self.into.append(float(str(record.args[0])))


async def main(full: bool) -> None:
    per_session = 2000 if full else 200
    targets: list[tuple[str, str | None]] = [("sqlite", None)]
    if os.environ.get("HYGIEIA_TEST_POSTGRES_URL"):
        targets.append(("postgresql", os.environ["HYGIEIA_TEST_POSTGRES_URL"]))
    report = Report("erase", full=full)
    report.note("messages", SESSIONS * per_session)
    table = Table(title=f"Erasing one user among {SESSIONS * per_session:,} messages ({SESSIONS} sessions)")
    for column in ("database", "messages erased", "erase_user (ms)", "of which reclaim (ms)"):
        table.add_column(column, justify="left" if column == "database" else "right")
    for name, url in targets:
        with tempfile.TemporaryDirectory() as tmp:
            async with scratch_url(url, Path(tmp)) as db_url:
                whole, reclaim, erased = await measure(db_url, per_session)
        table.add_row(name, f"{erased:,}", f"{whole:,.0f}", f"{reclaim:,.0f}")
        report.add(f"{name}/erase_user", whole)
        report.add(f"{name}/reclaim", reclaim)
    Console().print(table)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report.save()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="200,000 messages instead of 20,000")
    args = parser.parse_args()
    asyncio.run(main(args.full))
