"""SQL per addressed turn: statements and transactions before the agent call, and in the whole turn.

The real service (SQLite in a temp dir; PostgreSQL too when HYGIEIA_TEST_POSTGRES_URL is set)
serves addressed messages in one session of 1,000 active messages; SQLAlchemy's engine events
count every statement and transaction (``tests/turn_probe.py``). Intake is the inbox commit
the adapter waits for; "before the agent call" runs from that commit to the model call; the
whole turn is intake to an idle worker (the reply queued, the inbox item done). Delivering the
reply (the outbox loop, its own task) is counted apart. The counts are the same at every size;
``--full`` only serves more turns.

    python bench/turn_statements.py [--full] [--log]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import _root  # noqa: F401  (the checkout's root on sys.path: tests.turn_probe)
from _report import Report
from rich.console import Console
from rich.table import Table

from tests.turn_probe import QUIET_LEASES, TurnSample, probe, scratch_url

ACTIVE = 1000


async def measure(url: str, data_dir: Path, turns: int, show_log: bool) -> list[TurnSample]:
    async with probe(url, data_dir, cluster=QUIET_LEASES) as p:
        await p.fill(ACTIVE)
        await p.turn()  # the first turn of a process warms caches; it is not the steady state
        p.counter.keep_log = show_log
        samples = []
        for _ in range(turns):
            p.counter.log.clear()
            samples.append(await p.turn())
        if show_log:
            print("\n".join(p.counter.log))
        return samples


def typical(samples: list[TurnSample], field: str) -> tuple[int, int, int, int]:
    """Median and most statements, median and most transactions of ``field`` over the turns."""
    statements = sorted(getattr(s, field).statements for s in samples)
    transactions = sorted(getattr(s, field).transactions for s in samples)
    mid = len(samples) // 2
    return statements[mid], statements[-1], transactions[mid], transactions[-1]


async def main(full: bool, show_log: bool) -> None:
    turns = 50 if full else 10
    targets = [("sqlite", None)]
    if os.environ.get("HYGIEIA_TEST_POSTGRES_URL"):
        targets.append(("postgresql", os.environ["HYGIEIA_TEST_POSTGRES_URL"]))
    report = Report("turn_statements", full=full)
    report.note("active messages", ACTIVE)
    report.note("turns", turns)
    title = f"SQL per addressed turn, {ACTIVE:,} active messages, {turns} turns (median / most)"
    table = Table(title=title)
    for column in ("database", "phase", "statements", "transactions"):
        table.add_column(column, justify="left" if column in ("database", "phase") else "right")
    for name, url in targets:
        with tempfile.TemporaryDirectory() as tmp:
            async with scratch_url(url, Path(tmp)) as db_url:
                samples = await measure(db_url, Path(tmp), turns, show_log)
        for phase, label in (
            ("intake", "intake (inbox commit)"),
            ("before_call", "inbox commit -> agent call"),
            ("whole", "whole turn (intake -> idle)"),
        ):
            statements, most_statements, transactions, most_transactions = typical(samples, phase)
            table.add_row(
                name, label, f"{statements} / {most_statements}", f"{transactions} / {most_transactions}"
            )
            report.add(f"{name}/{phase}/statements", statements, unit="statements")
            report.add(f"{name}/{phase}/transactions", transactions, unit="transactions")
    Console().print(table)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report.save()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="50 turns instead of 10")
    parser.add_argument("--log", action="store_true", help="print the statements of the last turn")
    args = parser.parse_args()
    asyncio.run(main(args.full, args.log))
