"""Webhook intake: latency from a signed POST to its 2xx, and deliveries per second.

The real Service (webhooks adapter on the shared HTTP listener, gateway, SQL store, outbox delivery)
on SQLite in a temp dir (PostgreSQL too when HYGIEIA_TEST_POSTGRES_URL is set, in a schema of its
own). Posts are real HTTP on 127.0.0.1 through httpx, signed like GitHub's (HMAC-SHA256 of the
body), each with its own delivery id; the routes are ``deliver_only`` to an in-process fake
platform, so no model runs and what is measured is the door, the inbox commit and the relay.

- one sender: posts one at a time; p50/p99 of POST -> 202 (the inbox row is committed before it).
- N senders: ``senders`` clients post at once to ``routes`` routes (one chat each); acked/s until
  every 202, p50/p99 of each post, and delivered/s until every delivery was relayed to its chat.

The senders run in a child process (the service's CPU is measured alone, as a remote sender's would
not be on it); latency is the client's, POST sent to 202 read.

    python bench/webhook_intake.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import _root  # noqa: F401  (the checkout's root on sys.path)
import httpx
from _report import Report
from rich.console import Console
from rich.table import Table

from gateway.config import Settings
from gateway.platforms.base import InboundHandler, OutboundTarget, PlatformAdapter
from gateway.platforms.webhooks.signature import sign
from gateway.runner import Service
from gateway.runner.adapters import build_webhooks
from gateway.runner.listener import DoorListener

SECRET = "bench-webhook-secret"
MARK = "mona pushed "
PAYLOAD = {
    "ref": "refs/heads/main",
    "repository": {"full_name": "octo/hello"},
    "pusher": {"name": "mona"},
    "commits": [{"id": "0" * 40, "message": "Fix the flux capacitor " * 4}] * 3,
}


class RelayCounter(PlatformAdapter):
    """A fake Telegram in this process: counts the deliveries relayed to it (a joined burst counts
    each delivery in it)."""

    name = "telegram"

    def __init__(self) -> None:
        self.delivered = 0
        self.changed = asyncio.Event()

    async def start(self, handler: InboundHandler) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        # Each delivery's text starts so; a long burst may come split in parts.
        self.delivered += text.count(MARK)
        self.changed.set()
        return [str(self.delivered)]


def settings_for(data_dir: Path, url: str, routes: int) -> Settings:
    route = {
        "secret_env": "BENCH_HOOK_SECRET",
        "deliver_only": True,
        "rate_per_minute": 100_000,
        "template": "{{ pusher.name }} pushed {{ commits.0.message }}",  # MARK, then the message
    }
    return Settings(
        data_dir=data_dir,
        database_url=url,
        log_level="WARNING",
        api={"port": 0},
        webhooks={
            "routes": {f"r{n}": {**route, "deliver_to": f"telegram:{1000 + n}"} for n in range(routes)}
        },
    )


@contextlib.asynccontextmanager
async def service_at(url: str, routes: int) -> AsyncIterator[tuple[Service, RelayCounter, int]]:
    os.environ["BENCH_HOOK_SECRET"] = SECRET
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_for(Path(tmp), url.replace("{tmp}", tmp), routes)
        listener = DoorListener("127.0.0.1", 0)
        counter = RelayCounter()
        service = await Service.build(settings, [build_webhooks(settings, listener), counter])
        async with service:
            yield service, counter, listener.port


async def post(client: httpx.AsyncClient, url: str, body: bytes) -> float:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
    }
    started = time.perf_counter()
    response = await client.post(url, content=body, headers=headers)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 202:
        raise RuntimeError(f"{response.status_code}: {response.text}")
    return elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def send_all(port: int, senders: int, per_sender: int, routes: int, warmup: int) -> None:
    """The load generator, in a child process (its CPU is not the service's): prints JSON with
    every post's latency and the wall-clock start and end of the measured posts."""
    body = json.dumps(PAYLOAD).encode()
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=senders)) as client:
        for n in range(warmup):  # connections, first statements
            await post(client, f"http://127.0.0.1:{port}/hooks/r{n % routes}", body)

        async def sender(n: int) -> list[float]:
            target = f"http://127.0.0.1:{port}/hooks/r{n % routes}"
            return [await post(client, target, body) for _ in range(per_sender)]

        started = time.time()
        results = await asyncio.gather(*(sender(n) for n in range(senders)))
        acked = time.time()
    times = [t for result in results for t in result]
    print(json.dumps({"times": times, "started": started, "acked": acked}))


async def run_case(url: str, senders: int, per_sender: int, routes: int, warmup: int) -> dict[str, float]:
    """The service here, the senders in a child process; latency, acked/s and delivered/s."""
    total = senders * per_sender
    async with service_at(url, routes) as (_service, counter, port):
        argv = [__file__, "--send", str(port), str(senders), str(per_sender), str(routes), str(warmup)]
        child = await asyncio.create_subprocess_exec(sys.executable, *argv, stdout=asyncio.subprocess.PIPE)
        out, _ = await child.communicate()
        if child.returncode != 0:
            raise RuntimeError("the sender process failed")
        result = json.loads(out)
        while counter.delivered < total + warmup:
            counter.changed.clear()
            await asyncio.wait_for(counter.changed.wait(), 60)
        delivered = time.time() - result["started"]
    times: list[float] = result["times"]
    return {
        "p50": statistics.median(times),
        "p99": pct(times, 99),
        "acked/s": total / (result["acked"] - result["started"]),
        "delivered/s": total / delivered,
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--send", nargs=5, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.send:
        await send_all(*args.send)
        return 0
    count, senders, per_sender, routes = (2000, 32, 100, 8) if args.full else (300, 16, 25, 8)
    engines = {"sqlite": "sqlite+aiosqlite:///{tmp}/hygieia.db"}
    postgres = os.environ.get("HYGIEIA_TEST_POSTGRES_URL")
    if postgres:
        engines["postgresql"] = postgres
    report = Report("webhook_intake", full=args.full)
    table = Table(title=f"webhook intake: POST -> 202 (ms), deliveries/s; {senders} senders x {per_sender}")
    for column in ("engine", "case", "p50 ms", "p99 ms", "acked/s", "delivered/s"):
        table.add_column(column, justify="right" if column not in ("engine", "case") else "left")
    for engine, base in engines.items():
        schema = f"bench_hooks_{uuid.uuid4().hex[:8]}" if engine == "postgresql" else None
        url = base if schema is None else await schema_url(base, schema, "CREATE")
        try:
            alone = await run_case(url, 1, count, 1, 20)
            crowd = await run_case(url, senders, per_sender, routes, routes)
        finally:
            if schema is not None:
                await schema_url(base, schema, "DROP")
        table.add_row(
            engine,
            "one sender",
            f"{alone['p50']:.1f}",
            f"{alone['p99']:.1f}",
            f"{alone['acked/s']:.0f}",
            f"{alone['delivered/s']:.0f}",
        )
        table.add_row(
            engine,
            f"{senders} senders, {routes} chats",
            f"{crowd['p50']:.1f}",
            f"{crowd['p99']:.1f}",
            f"{crowd['acked/s']:.0f}",
            f"{crowd['delivered/s']:.0f}",
        )
        report.add(f"{engine}/one sender/p50", alone["p50"])
        report.add(f"{engine}/one sender/p99", alone["p99"])
        report.add(f"{engine}/senders/p50", crowd["p50"])
        report.add(f"{engine}/senders/p99", crowd["p99"])
        report.add(f"{engine}/senders/acked per s", crowd["acked/s"], unit="msg/s", better="higher")
        report.add(f"{engine}/senders/delivered per s", crowd["delivered/s"], unit="msg/s", better="higher")
    report.note("posts one sender", count)
    report.note("posts many senders", senders * per_sender)
    Console().print(table)
    report.save()
    return 0


async def schema_url(url: str, schema: str, verb: str) -> str:
    """CREATE (or DROP ... CASCADE) a schema of the bench's own on PostgreSQL; the URL that uses it."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text(f"{verb} SCHEMA {schema}" + (" CASCADE" if verb == "DROP" else "")))
    await engine.dispose()
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options=-csearch_path%3D{schema}"


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
