"""Scale-out: throughput with 1, 2 and 3 workers on one PostgreSQL database, and intake failover.

Real ``hygieia run`` processes (tests/cluster/harness.py) with the fakes in this process and the
fake model answering after 200 ms. For each worker count: one ``--role intake`` node plus N
``--role worker`` nodes serve the same load (reduced: 12 chats x 6 messages; ``--full``: 60 x 10),
every chat sending its next message once the previous one is answered. Then the failover: two
intake nodes and a worker, the leader killed with SIGKILL mid-run; the time from the kill to the
standby's first ``getUpdates``.

Needs HYGIEIA_TEST_POSTGRES_URL (skips, saying so, without it). The machine's load average is
printed with the table: on a shared 2-core machine the workers compete for the same cores, so
the ratio understates what separate machines would give.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import _root  # noqa: F401  - puts the checkout on sys.path
from _report import Report
from rich.console import Console
from rich.table import Table

from tests.cluster.harness import Cluster, cluster, postgres_url, run_users

LATENCY = 0.2


async def live_workers(c: Cluster) -> int:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return sum(1 for lease in await c.store.lease_list("node:worker:") if lease.expires_at > now)


async def throughput(url: str, tmp: Path, workers: int, chats: int, per_chat: int) -> dict[str, float]:
    async with cluster(url, tmp, latency=LATENCY) as c:
        intake = await c.start_node("intake", "--role", "intake")
        await c.wait_for_leader("intake:telegram", intake.pid)
        await c.wait_for_leader("intake:discord", intake.pid)
        for n in range(workers):
            await c.start_node(f"worker{n}", "--role", "worker")
        deadline = time.monotonic() + 90
        while await live_workers(c) < workers:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {await live_workers(c)} of {workers} workers came up")
            await asyncio.sleep(0.2)
        seconds = await run_users(c, c.chats(chats), per_chat, within=120)
        total = chats * per_chat
        return {"messages": total, "seconds": seconds, "rate": total / seconds}


async def failover(url: str, tmp: Path, chats: int, per_chat: int) -> dict[str, float]:
    async with cluster(url, tmp, latency=LATENCY) as c:
        leader = await c.start_node("intake-a", "--role", "intake", "--platform", "telegram")
        await c.wait_for_leader("intake:telegram", leader.pid)
        await c.start_node("intake-b", "--role", "intake", "--platform", "telegram")
        await c.start_node("worker", "--role", "worker")
        users = [chat for chat in c.chats(chats * 2) if chat.platform == "telegram"][:chats]
        killed: dict[str, float] = {}

        async def progress(answered: int) -> None:
            if answered >= chats * per_chat // 3 and "at" not in killed:
                killed["at"] = time.monotonic()
                leader.kill()

        seconds = await run_users(c, users, per_chat, within=120, on_progress=progress)
        polls = [call.at for call in c.telegram.calls("getUpdates") if call.at > killed["at"] + 0.01]
        return {"failover": polls[0] - killed["at"], "seconds": seconds, "conflicts": c.telegram.conflicts}


async def main(full: bool, as_json: bool) -> int:
    url = postgres_url()
    if url is None:
        print("cluster bench: needs HYGIEIA_TEST_POSTGRES_URL (PostgreSQL); skipped", file=sys.stderr)
        return 0
    chats, per_chat = (60, 10) if full else (12, 6)
    report = Report("cluster", full=full)
    rows: list[tuple[str, str, str]] = []
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="hygieia-cluster-bench-") as tmp:
        base = None
        for workers in (1, 2, 3):
            got = await throughput(url, Path(tmp) / f"w{workers}", workers, chats, per_chat)
            base = base or got["rate"]
            report.add(f"{workers} workers/throughput", got["rate"], unit="msg/s", better="higher")
            results[f"workers_{workers}"] = got
            rows.append((f"{workers} worker(s)", f"{got['rate']:.2f} msg/s", f"x{got['rate'] / base:.2f}"))
        fail = await failover(url, Path(tmp) / "failover", max(4, chats // 3), per_chat)
        report.add("telegram intake failover", fail["failover"] * 1000)
        results["failover"] = fail
        rows.append(("Telegram intake failover", f"{fail['failover']:.1f} s", f"409s: {fail['conflicts']:g}"))
    load = os.getloadavg()
    report.note("load average", [round(x, 2) for x in load])
    report.note("load", f"{chats} chats x {per_chat} messages, model latency {LATENCY * 1000:.0f} ms")
    report.save()
    if as_json:
        print(json.dumps({"full": full, "load_average": load, **results}, indent=1))
        return 0
    table = Table(
        title=f"Scale-out: {chats} chats x {per_chat} messages, model latency {LATENCY * 1000:.0f} ms"
    )
    for column in ("case", "result", "vs 1 worker / note"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console = Console()
    console.print(table)
    console.print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="60 chats x 10 messages (the issue's load)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.full, args.json)))
