"""Hand-off latency on a PostgreSQL cluster: an inbox row committed by the intake -> a worker's claim.

Real ``hygieia run`` processes (tests/cluster/harness.py): one ``--role intake`` node (Telegram)
and 1 or 3 ``--role worker`` nodes, the fake model answering at once. Messages arrive one at a
time, each to a chat of its own, 0.2 s apart. Two ways to find work: ``notify`` (the default:
``LISTEN/NOTIFY`` sent in the inbox write's transaction) and ``polling`` (wake-ups off, the
inbox polled every 0.5 s, the old default). The times are taken inside PostgreSQL by a trigger
this bench adds to its own schema (the row's insert, then its first move to ``processing``), so
both ends read one clock. Reduced: 30 messages per case; ``--full``: 200.

Needs HYGIEIA_TEST_POSTGRES_URL (skips, saying so, without it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _root  # noqa: F401  - puts the checkout on sys.path
from _report import Report
from rich.console import Console
from rich.table import Table
from sqlalchemy import text

from tests.cluster.harness import TELEGRAM_BASE_CHAT, Chat, Cluster, cluster, postgres_url

MODES = {
    "notify": {"HYGIEIA_CLUSTER__NOTIFY": "true"},
    "polling": {"HYGIEIA_CLUSTER__NOTIFY": "false", "HYGIEIA_CLUSTER__INBOX_POLL_SECONDS": "0.5"},
}
TRIGGER = [
    "CREATE TABLE handoff (inbox_id bigint, event text, at timestamptz)",
    """CREATE FUNCTION handoff_mark() RETURNS trigger AS $$ BEGIN
         IF TG_OP = 'INSERT' THEN INSERT INTO handoff VALUES (NEW.id, 'put', clock_timestamp());
         ELSIF NEW.status = 'processing' AND OLD.status <> 'processing' THEN
           INSERT INTO handoff VALUES (NEW.id, 'claim', clock_timestamp());
         END IF;
         RETURN NEW;
       END $$ LANGUAGE plpgsql""",
    "CREATE TRIGGER handoff_t AFTER INSERT OR UPDATE ON inbox FOR EACH ROW EXECUTE FUNCTION handoff_mark()",
]
GAP = 0.2


async def _workers_up(c: Cluster, workers: int) -> None:
    from datetime import UTC, datetime

    deadline = time.monotonic() + 120
    while True:
        now = datetime.now(UTC)
        if sum(1 for lease in await c.store.lease_list("node:worker:") if lease.expires_at > now) >= workers:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the {workers} workers did not come up")
        await asyncio.sleep(0.2)


async def case(url: str, tmp: Path, mode: str, workers: int, messages: int) -> list[float]:
    """Hand-off seconds, one per message."""
    async with cluster(url, tmp, latency=0.0, extra_env=MODES[mode]) as c:
        async with c.store.db.transaction() as s:
            for statement in TRIGGER:
                await s.execute(text(statement))
        intake = await c.start_node("intake", "--role", "intake", "--platform", "telegram")
        await c.wait_for_leader("intake:telegram", intake.pid, within=120)
        for n in range(workers):
            await c.start_node(f"worker{n}", "--role", "worker")
        await _workers_up(c, workers)
        await asyncio.sleep(1.0)  # the listeners connect
        for k in range(messages):
            c.say(Chat("telegram", TELEGRAM_BASE_CHAT + k), f"c{k:03d} m000")
            await asyncio.sleep(GAP)
        query = text(
            "SELECT extract(epoch FROM c.at - p.at) FROM handoff p JOIN handoff c "
            "ON c.inbox_id = p.inbox_id AND c.event = 'claim' WHERE p.event = 'put'"
        )
        deadline = time.monotonic() + 60
        while True:
            async with c.store.db.transaction(write=False) as s:
                rows = [float(x) for x in await s.scalars(query)]
            if len(rows) >= messages or time.monotonic() > deadline:
                return rows
            await asyncio.sleep(0.2)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(full: bool, as_json: bool) -> int:
    url = postgres_url()
    if url is None:
        print("handoff bench: needs HYGIEIA_TEST_POSTGRES_URL (PostgreSQL); skipped", file=sys.stderr)
        return 0
    messages = 200 if full else 30
    report = Report("handoff", full=full)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="hygieia-handoff-bench-") as tmp:
        for mode in ("polling", "notify"):
            for workers in (1, 3):
                got = await case(url, Path(tmp) / f"{mode}{workers}", mode, workers, messages)
                if not got:
                    raise SystemExit(f"{mode} with {workers} worker(s): nothing was claimed")
                p50, p99 = statistics.median(got) * 1000, _pct(got, 0.99) * 1000
                name = f"{mode} {workers} worker(s)"
                results[name] = {"p50_ms": p50, "p99_ms": p99, "claimed": len(got)}
                report.add(f"{mode}/{workers} workers/p50", p50)
                report.add(f"{mode}/{workers} workers/p99", p99)
    load = os.getloadavg()
    report.note("load average", [round(x, 2) for x in load])
    report.note("load", f"{messages} messages, one every {GAP * 1000:.0f} ms, each to a chat of its own")
    report.save()
    if as_json:
        print(json.dumps({"full": full, "load_average": load, **results}, indent=1))
        return 0
    table = Table(title=f"Hand-off (intake commit -> claim), {messages} messages")
    for column in ("case", "p50", "p99", "claimed"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for name, got in results.items():
        table.add_row(name, f"{got['p50_ms']:.1f} ms", f"{got['p99_ms']:.1f} ms", f"{got['claimed']:g}")
    console = Console()
    console.print(table)
    console.print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="200 messages per case")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.full, args.json)))
