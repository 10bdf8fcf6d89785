"""Gateway overhead per addressed message: inbox commit -> agent call, in a session of 1,000 active
messages on top of an archive (1,000,000 archived rows with ``--full``, 100,000 by default).

The real service (``tests/turn_probe.py``): Gateway, store (SQLite in a temp dir; PostgreSQL too
when HYGIEIA_TEST_POSTGRES_URL is set, in a schema of its own, dropped afterwards), AgentLoop
and ContextCompressor; the provider is the offline one, wrapped to stamp the moment the agent
calls it, so the numbers are the gateway's own work (claim, append, dedupe check, active view,
hygiene estimate, turn setup) and nothing of a model. The archive is generated inside the
database (one INSERT ... SELECT); the messages under test go through the real path.

``--gc`` compares the collector's settings: as the service runs them (``gc.freeze()`` after
start-up, tuned thresholds: ``gateway.runner.tune_gc``) against Python's defaults.

    python bench/gateway_overhead.py [--full] [--samples N] [--gc]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

import _root  # noqa: F401  (the checkout's root on sys.path: tests.turn_probe)
from _report import Report
from rich.console import Console
from rich.table import Table

from tests.turn_probe import probe, scratch_url

ACTIVE = 1000
PHASES = (("intake", "intake (inbox commit)"), ("to_call", "inbox commit -> agent call"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def measure(
    url: str, data_dir: Path, archived: int, samples: int, tuned: bool
) -> dict[str, list[float]]:
    started = time.perf_counter()
    async with probe(url, data_dir, archived=archived, tune_gc=tuned) as p:
        await p.fill(ACTIVE)
        print(f"  corpus: {ACTIVE:,} active + {archived:,} archived in {time.perf_counter() - started:.1f}s")
        for _ in range(3):  # warm-up: the first turns of a process fill caches
            await p.turn()
        taken = [await p.turn() for _ in range(samples)]
    return {
        "intake": [t.intake_ms for t in taken],
        "to_call": [t.to_call_ms for t in taken],
    }


async def run_one(url: str | None, archived: int, samples: int, tuned: bool) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        async with scratch_url(url, Path(tmp)) as db_url:
            return await measure(db_url, Path(tmp), archived, samples, tuned)


async def main(full: bool, samples: int, compare_gc: bool) -> None:
    archived = 1_000_000 if full else 100_000
    targets: list[tuple[str, str | None]] = [("sqlite", None)]
    if os.environ.get("HYGIEIA_TEST_POSTGRES_URL"):
        targets.append(("postgresql", os.environ["HYGIEIA_TEST_POSTGRES_URL"]))
    report = Report("gateway_overhead", full=full)
    report.note("active", ACTIVE)
    report.note("archived", archived)
    report.note("samples", samples)
    title = f"Gateway overhead, {ACTIVE:,} active + {archived:,} archived, {samples} turns (ms)"
    table = Table(title=title)
    for column in ("database", "gc", "phase", "p50", "p95", "p99", "max"):
        table.add_column(column, justify="left" if column in ("database", "gc", "phase") else "right")
    modes = [("tuned", True), ("default", False)] if compare_gc else [("tuned", True)]
    for name, url in targets:
        for mode, tuned in modes:
            gc.unfreeze()
            gc.set_threshold(700, 10, 10)
            print(f"{name}, gc {mode}:")
            results = await run_one(url, archived, samples, tuned)
            for phase, label in (
                ("intake", "intake (inbox commit)"),
                ("to_call", "inbox commit -> agent call"),
            ):
                values = results[phase]
                stats = {
                    "p50": statistics.median(values),
                    "p95": percentile(values, 0.95),
                    "p99": percentile(values, 0.99),
                    "max": max(values),
                }
                table.add_row(name, mode, label, *(f"{v:.2f}" for v in stats.values()))
                suffix = "" if mode == "tuned" else "/gc default"
                for stat in ("p50", "p95", "p99"):
                    report.add(f"{name}/{phase}/{stat}{suffix}", stats[stat])
    Console().print(table)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report.save()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="1,000,000 archived rows and 500 turns")
    parser.add_argument("--samples", type=int, default=None, help="turns measured (default 100; --full 500)")
    parser.add_argument("--gc", action="store_true", help="also run with Python's default collector")
    args = parser.parse_args()
    asyncio.run(main(args.full, args.samples or (500 if args.full else 100), args.gc))
