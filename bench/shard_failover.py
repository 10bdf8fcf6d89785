"""Discord shards claimed through the database (``discord.shard_ids: auto``): how long a cluster of
intake nodes takes to cover every shard from a cold start, and how long shards go unserved when a
node dies (claims expire, others take over) or stops cleanly (claims released).

Real discord.py adapters against the fake Discord, real leases on SQLite (and PostgreSQL when
``HYGIEIA_TEST_POSTGRES_URL`` is set), nodes in one process. The fake does not enforce Discord's
identify limit (one session start per 5 s per bot): on Discord, each newly connected shard adds up
to 5 s, so read these figures as the claiming mechanics' share of a failover.

    python bench/shard_failover.py [--full]      # reduced: 8 shards, 3 nodes, 3 s claims; full: 16, 4, 15 s
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import _root  # noqa: F401  (puts the checkout on sys.path for tests.fakes)
from _report import Report
from rich.console import Console
from rich.table import Table
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from gateway.cluster.shard_claims import ShardClaimer
from gateway.config import DiscordSettings
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from tests.fakes.discord import FakeDiscord
from tests.gateway.inbox_recorder import Inbox


@asynccontextmanager
async def database(engine: str, tmp: Path) -> AsyncIterator[str]:
    if engine == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp / 'shards.db'}"
        return
    base = os.environ["HYGIEIA_TEST_POSTGRES_URL"]
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(base, poolclass=NullPool)
    async with admin.begin() as conn:
        await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield (
            make_url(base)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    finally:
        async with admin.begin() as conn:
            await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        await admin.dispose()


async def until(condition: Callable[[], bool], limit: float, fake: FakeDiscord) -> float:
    """Seconds until ``condition`` holds (polled every 10 ms); raises after ``limit``, or as soon as
    one shard has two live sessions (two nodes would both get its events)."""
    start = time.monotonic()
    while not condition():
        live = fake.connected_shards()
        if len(live) != len(set(live)):
            raise RuntimeError(f"a shard is connected twice: {live}")
        if time.monotonic() - start > limit:
            raise RuntimeError(f"not reached within {limit:g} s")
        await asyncio.sleep(0.01)
    return time.monotonic() - start


async def run(engine: str, shards: int, nodes: int, ttl: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="hygieia-shards-") as tmp:
        async with database(engine, Path(tmp)) as url:
            await upgrade_to_head(url)
            async with (
                Database(url) as db,
                FakeDiscord(shards=shards, rate_limit=(10_000, 5.0)) as fake,
                AsyncExitStack() as stack,
            ):
                store = Store(db)
                everything = [(i, shards) for i in range(shards)]
                covered = lambda: fake.connected_shards() == everything  # noqa: E731
                claimers: list[ShardClaimer] = []
                adapters: list[DiscordAdapter] = []
                for n in range(nodes):
                    adapter = DiscordAdapter(
                        fake.token,
                        api_base=fake.api_base,
                        gateway_url=fake.gateway_url,
                        settings=DiscordSettings(
                            shard_ids="auto",
                            shard_count=shards,
                            slash_commands=False,
                            identify_interval_seconds=0,
                            guild_ready_timeout=0.05,
                        ),
                    )
                    await adapter.start(Inbox())
                    stack.push_async_callback(adapter.stop)
                    claimer = ShardClaimer(store, adapter, shard_count=shards, ttl_seconds=ttl, node=f"n{n}")
                    stack.push_async_callback(claimer.stop)
                    adapters.append(adapter)
                    claimers.append(claimer)
                started = time.monotonic()
                await asyncio.gather(*(c.start() for c in claimers))
                share = math.ceil(shards / nodes)
                await until(lambda: covered() and all(len(c.held) <= share for c in claimers), ttl * 20, fake)
                cold = time.monotonic() - started

                victim = max(claimers, key=lambda c: len(c.held))  # the worst case: the biggest share
                index = claimers.index(victim)
                task = victim._task
                assert task is not None
                task.cancel()  # kill -9: no renewal, no release
                await asyncio.gather(task, return_exceptions=True)
                await adapters[index].stop()
                crash = await until(covered, ttl * 4, fake)
                claimers.remove(victim)

                leaving = max(claimers, key=lambda c: len(c.held))
                await leaving.stop()  # SIGTERM: disconnect, release
                clean = await until(covered, ttl * 4, fake)
                return {"cold": cold, "crash": crash, "clean": clean}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args()
    shards, nodes, ttl = (16, 4, 15.0) if args.full else (8, 3, 3.0)
    engines = ["sqlite"] + (["postgresql"] if os.environ.get("HYGIEIA_TEST_POSTGRES_URL") else [])
    report = Report("shard_failover", full=args.full)
    table = Table(title=f"Discord shard claims: {shards} shards, {nodes} nodes, claims of {ttl:g} s")
    for column in ("engine", "cold start: all shards covered", "node killed: shards back", "node stopped"):
        table.add_column(column, justify="right" if column != "engine" else "left")
    for engine in engines:
        result = asyncio.run(run(engine, shards, nodes, ttl))
        table.add_row(engine, *(f"{result[k]:.2f} s" for k in ("cold", "crash", "clean")))
        for key, value in result.items():
            report.add(f"{engine}/{key}", value * 1000)
    report.note("shards", shards)
    report.note("nodes", nodes)
    report.note("ttl_seconds", ttl)
    report.note("loadavg", os.getloadavg())
    console = Console()
    console.print(table)
    console.print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    report.save()


if __name__ == "__main__":
    main()
