"""Memory over a long session: RSS of the gateway process over N turns in ONE session.

The real path: the runner's Service (gateway, store on SQLite in a temp dir, AgentLoop,
ContextCompressor, the Anthropic provider through the SDK) talking to the fake Anthropic server
(``python -m tests.fakes anthropic``, in its own process so that its request log is not counted)
with no latency and a tiny window, so that compaction fires every few dozen turns. Each turn is one
addressed message, answered before the next. RSS is read from /proc/self/status.

    python bench/memory.py [--full] [--turns N] [--window TOKENS] [--trace] [--json]

Reduced: 2,000 turns; ``--full``: 10,000. ``--trace`` runs tracemalloc and prints the top
allocation sites that grew between the first sample after warm-up and the end (slow).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import _root  # tests/fakes on sys.path
from _report import Report
from rich.console import Console
from rich.table import Table

from gateway.config import Settings
from gateway.platforms.base import InboundMessage
from gateway.runner import Service
from gateway.store import db as store_db
from tests.turn_probe import NullAdapter as ProbeAdapter

WARMUP_TURNS = 200


class NullAdapter(ProbeAdapter):
    """A platform that accepts every reply and keeps nothing (the probe's, under this bench's name)."""

    name = "bench"


def rss_mb() -> tuple[float, float, float]:
    """(RSS, its anonymous part, its file-backed part) in MB. The file-backed part is mostly the
    SQLite database mapped into memory (``mmap_size``): it follows the file's size and the kernel
    can drop it at any time; the anonymous part is the heap, where a leak would show."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("RssAnon", 0.0), fields.get("RssFile", 0.0)


def db_mb(folder: str) -> float:
    """The SQLite files (database, WAL, shared memory) in MB."""
    return sum(f.stat().st_size for f in Path(folder).glob("bench.db*")) / 2**20


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def wait_listening(port: int, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return


def object_counts() -> Counter[str]:
    """Live objects tracked by the garbage collector, by type."""
    return Counter(type(o).__name__ for o in gc.get_objects())


async def run(turns: int, window: int, every: int, trace: bool) -> dict[str, Any]:
    port = free_port()
    fake = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.fakes", "anthropic"),
        *("--port", str(port), "--context-window", str(window)),
        cwd=_root.ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    samples: list[tuple[int, float, float, float, float, float]] = []  # turn, RSS, anon, file, s, DB MB
    top: list[str] = []
    counts: Counter[str] = Counter()
    objects: list[str] = []
    try:
        await wait_listening(port)
        with tempfile.TemporaryDirectory(prefix="hygieia-memory-") as tmp:
            settings = Settings(
                data_dir=Path(tmp),
                database_url=f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}",
                allow_all_users=True,
                anthropic_api_key="fake",
                anthropic_base_url=f"http://127.0.0.1:{port}",
                context_window=window,
            )
            adapter = NullAdapter()
            service = await Service.build(settings, [adapter])
            await service.start()
            started = time.perf_counter()
            snapshot: tracemalloc.Snapshot | None = None
            try:
                for turn in range(1, turns + 1):
                    text = f"turn {turn}: please note that the deploy of service {turn % 97} is done"
                    msg = InboundMessage(
                        platform="bench",
                        chat_id="c1",
                        user_id="u1",
                        text=text,
                        platform_message_id=f"m{turn}",
                    )
                    await service.gateway.intake(msg)
                    await service.gateway.wait_idle()
                    if turn % every == 0 or turn == WARMUP_TURNS:
                        gc.collect()
                        rss, anon, mapped = rss_mb()
                        db = db_mb(tmp)
                        samples.append((turn, rss, anon, mapped, time.perf_counter() - started, db))
                        print(f"turn {turn:,}: RSS {rss:.1f} MB, anonymous {anon:.1f} MB", flush=True)
                        if turn == WARMUP_TURNS:
                            counts = object_counts()
                        if trace and turn == WARMUP_TURNS:
                            tracemalloc.start(10)
                            snapshot = tracemalloc.take_snapshot()
                gc.collect()
                grown = object_counts()
                grown.subtract(counts)
                objects = [f"{name}: {count:+,}" for name, count in grown.most_common(8) if count > 0]
                if snapshot is not None:
                    gc.collect()
                    diff = tracemalloc.take_snapshot().compare_to(snapshot, "lineno")
                    top = [str(stat) for stat in diff[:15]]
                    tracemalloc.stop()
                compactions = await service.store.list_compactions(await session_id(service))
            finally:
                await service.stop()
    finally:
        fake.terminate()
        await fake.wait()
    return {
        "samples": samples,
        "top": top,
        "objects": objects,
        "compactions": len(compactions),
        "replies": adapter.sent,
    }


async def session_id(service: Service) -> str:
    info = await service.store.current_session("bench:dm:c1")
    if info is None:
        raise SystemExit("the bench session was never created")
    return info.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="10,000 turns")
    parser.add_argument("--turns", type=int, help="turns (default 2,000; 10,000 with --full)")
    parser.add_argument("--window", type=int, default=8_000, help="context window in tokens")
    parser.add_argument("--trace", action="store_true", help="tracemalloc: top growing allocation sites")
    parser.add_argument("--json", action="store_true", help="print the samples as JSON too")
    parser.add_argument(
        "--sqlite-cache-kib",
        type=int,
        help="diagnosis: SQLite's page cache per connection (default the store's own, 16 MiB)",
    )
    args = parser.parse_args()
    turns = args.turns or (10_000 if args.full else 2_000)
    if args.sqlite_cache_kib:
        store_db.SQLITE_CACHE_KIB = args.sqlite_cache_kib  # read when each connection opens
    every = max(WARMUP_TURNS, turns // 10)
    result = asyncio.run(run(turns, args.window, every, args.trace))
    samples = result["samples"]
    first = next(sample for sample in samples if sample[0] == WARMUP_TURNS)
    table = Table(title=f"RSS over {turns:,} turns in one session ({args.window:,}-token window, fake model)")
    columns = ("turn", "RSS MB", "anonymous MB", "file-backed MB", "SQLite files MB", "turns/s")
    for column in columns:
        table.add_column(column, justify="right")
    for turn, rss, anon, mapped, seconds, db in samples:
        table.add_row(
            f"{turn:,}",
            f"{rss:.1f} ({rss - first[1]:+.1f})",
            f"{anon:.1f} ({anon - first[2]:+.1f})",
            f"{mapped:.1f} ({mapped - first[3]:+.1f})",
            f"{db:.1f}",
            f"{turn / seconds:.0f}",
        )
    last = samples[-1]
    growth, anon_growth = last[1] - first[1], last[2] - first[2]
    load = os.getloadavg()
    console = Console(width=140)
    console.print(table)
    print(
        f"growth after warm-up (turn {WARMUP_TURNS}): RSS {growth:+.1f} MB, anonymous {anon_growth:+.1f} MB,"
        f" over {turns - WARMUP_TURNS:,} turns; {result['compactions']} compactions,"
        f" {result['replies']:,} replies; load average {' '.join(f'{x:.2f}' for x in load)}"
    )
    print("live objects grown since warm-up:", ", ".join(result["objects"]) or "none")
    for line in result["top"]:
        print(line)
    report = Report("memory", full=args.full)
    report.add("rss growth after warm-up", growth, unit="MB")
    report.add("anonymous rss growth after warm-up", anon_growth, unit="MB")
    report.add("rss at end", last[1], unit="MB")
    report.note("turns", turns)
    report.note("compactions", result["compactions"])
    report.save()
    if args.json:
        print(json.dumps({"samples": samples, "growth_mb": growth, "compactions": result["compactions"]}))


if __name__ == "__main__":
    main()
