"""Throughput of one gateway process: addressed messages/s end to end, ambient intake msg/s.

The real Service (gateway, store, AgentLoop, AnthropicProvider through the real SDK, outbox
delivery) on SQLite in a temp dir (PostgreSQL too when HYGIEIA_TEST_POSTGRES_URL is set). The
model is the fake Anthropic server of tests/fakes at 0 latency, run in its own process (it plays
a remote API: its CPU is not the gateway's). Replies go to an in-process fake platform.

- addressed: ``chats`` DMs talk at once; each sends a message, waits for its reply, sends the
  next (a conversation: one turn per message, nothing coalesced). msg/s = answered messages /
  wall time, from the first inbox commit to the last reply handed to the platform.
- ambient intake: ``groups`` group chats receive messages not addressed to the bot, all at
  once (stored only; one producer per group, as with many connections or webhook requests).
  "acked" = messages/s until every ``intake`` returned (each returns once its inbox row is
  committed, when the platform may be acknowledged); "stored" = until every one is in its
  conversation (messages row) and its inbox item done. "one producer": the same with a single
  producer handing over one message at a time (the Telegram and Discord adapters take one
  update at a time and confirm it after its commit).

    python bench/throughput.py [--full] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from _child_server import child_server
from _report import Report
from rich.console import Console
from rich.table import Table

from gateway.config import Settings
from gateway.platforms.base import InboundHandler, InboundMessage, OutboundTarget, PlatformAdapter
from gateway.runner import Service

_FAKE = """
import asyncio, sys
from tests.fakes.anthropic import FakeAnthropic

async def main():
    fake = FakeAnthropic()
    async with fake:
        print(fake.base_url, flush=True)
        while True:
            await asyncio.sleep(5)
            fake.requests.clear()  # a long run must not grow the fake's memory
            fake.usages.clear()

asyncio.run(main())
"""


def fake_anthropic() -> contextlib.AbstractAsyncContextManager[str]:
    """The fake Anthropic server in a child process; yields its base URL."""
    return child_server(_FAKE)


class BenchPlatform(PlatformAdapter):
    """A fake platform in this process: counts replies per chat and wakes who waits for one."""

    name = "bench"

    def __init__(self) -> None:
        self.sent = 0
        self._waiters: dict[str, asyncio.Queue[str]] = {}

    async def start(self, handler: InboundHandler) -> None:
        self.handler = handler

    async def stop(self) -> None:
        return None

    def replies(self, chat_id: str) -> asyncio.Queue[str]:
        return self._waiters.setdefault(chat_id, asyncio.Queue())

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        self.sent += 1
        self.replies(target.chat_id).put_nowait(text)
        return [str(self.sent)]


def settings_for(data_dir: Path, url: str, base_url: str) -> Settings:
    return Settings(
        data_dir=data_dir,
        database_url=url,
        allow_all_users=True,
        anthropic_api_key="bench",
        anthropic_base_url=base_url,
    )


async def addressed(
    service: Service, platform: BenchPlatform, chats: int, rounds: int, tag: str = "q"
) -> dict[str, float]:
    async def chat(c: int) -> None:
        inbox = platform.replies(f"dm{c}")
        for r in range(rounds):
            msg = InboundMessage(
                platform="bench",
                chat_id=f"dm{c}",
                user_id=f"u{c}",
                text=f"question {r} from chat {c}: what is the plan for today?",
                platform_message_id=f"{tag}{r}",  # a repeated id would be stored once, unanswered
            )
            await service.gateway.intake(msg)
            await asyncio.wait_for(inbox.get(), 120)

    total = chats * rounds
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(chat(c) for c in range(chats)))
    elapsed = time.perf_counter() - started
    cpu_ms = (time.process_time() - cpu) * 1000 / total
    return {"messages": total, "seconds": elapsed, "msg/s": total / elapsed, "cpu ms/msg": cpu_ms}


async def ambient(
    service: Service, groups: int, per_group: int, producers: int | None = None
) -> dict[str, float]:
    """``producers`` None: one per group, all at once; 1: one at a time, like one Telegram poller
    or Discord connection (each update is confirmed after its commit, the next one follows)."""

    async def group(g: int) -> None:
        for i in range(per_group):
            msg = InboundMessage(
                platform="bench",
                chat_id=f"g{g}",
                user_id=f"u{i % 7}",
                text=f"message {i} in group {g}: lunch at noon, or later?",
                platform_message_id=f"a{i}",
                chat_type="group",
                addressed=False,
            )
            await service.gateway.intake(msg)

    async def serially() -> None:
        for g in range(groups):
            await group(g)

    total = groups * per_group
    started, cpu = time.perf_counter(), time.process_time()
    if producers == 1:
        await serially()
    else:
        await asyncio.gather(*(group(g) for g in range(groups)))
    acked = time.perf_counter() - started
    await service.gateway.wait_idle()
    stored = time.perf_counter() - started
    return {
        "messages": total,
        "acked msg/s": total / acked,
        "stored msg/s": total / stored,
        "cpu ms/msg": (time.process_time() - cpu) * 1000 / total,
    }


async def run_engine(
    url: str | None, base_url: str, sizes: dict[str, int], profile: cProfile.Profile | None
) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        db_url = url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        platform = BenchPlatform()
        service = await Service.build(settings_for(Path(tmp), db_url, base_url), [platform])
        await service.start()
        try:
            # Warm up: sessions exist, connections are open, the SDK's client is built.
            await addressed(service, platform, 4, 1, tag="warm")
            results: dict[str, dict[str, float]] = {}
            steps: list[tuple[str, Callable[[], Awaitable[dict[str, float]]]]] = [
                ("addressed", lambda: addressed(service, platform, sizes["chats"], sizes["rounds"])),
                ("ambient", lambda: ambient(service, sizes["groups"], sizes["per_group"])),
                ("ambient, one producer", lambda: ambient(service, 1, sizes["serial"], producers=1)),
            ]
            for name, step in steps:
                if profile is not None:
                    profile.enable()
                results[name] = await step()
                if profile is not None:
                    profile.disable()
            return results
        finally:
            await service.stop()


async def main(full: bool, profile_to: Path | None) -> None:
    sizes = (
        {"chats": 50, "rounds": 40, "groups": 50, "per_group": 200, "serial": 2000}
        if full
        else {"chats": 20, "rounds": 10, "groups": 20, "per_group": 50, "serial": 500}
    )
    targets: list[tuple[str, str | None]] = [("sqlite", None)]
    if os.environ.get("HYGIEIA_TEST_POSTGRES_URL"):
        targets.append(("postgresql", os.environ["HYGIEIA_TEST_POSTGRES_URL"]))
    report = Report("throughput", full=full)
    for key, value in sizes.items():
        report.note(key, value)
    profile = cProfile.Profile() if profile_to is not None else None
    load_before = os.getloadavg()
    rows: list[tuple[str, dict[str, dict[str, float]]]] = []
    async with fake_anthropic() as base_url:
        for name, url in targets:
            async with own_schema(url) as scoped:
                rows.append(
                    (name, await run_engine(scoped, base_url, sizes, profile if url is None else None))
                )
    load_after = os.getloadavg()
    table = Table(
        title=(
            f"Throughput, one process, fake model at 0 latency: addressed {sizes['chats']} chats x "
            f"{sizes['rounds']} turns, ambient {sizes['groups']} groups x {sizes['per_group']} messages"
        ),
        caption=f"load average before {fmt_load(load_before)}, after {fmt_load(load_after)} (2 shared cores)",
    )
    columns = (
        "database",
        "addressed msg/s",
        "addressed CPU ms/msg",
        "ambient acked msg/s",
        "ambient stored msg/s",
        "ambient CPU ms/msg",
        "one producer acked msg/s",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "database" else "right")
    for name, result in rows:
        table.add_row(
            name,
            f"{result['addressed']['msg/s']:.0f}",
            f"{result['addressed']['cpu ms/msg']:.1f}",
            f"{result['ambient']['acked msg/s']:.0f}",
            f"{result['ambient']['stored msg/s']:.0f}",
            f"{result['ambient']['cpu ms/msg']:.2f}",
            f"{result['ambient, one producer']['acked msg/s']:.0f}",
        )
        serial = result["ambient, one producer"]["acked msg/s"]
        report.add(f"{name}/ambient one producer acked msg per s", serial, unit="msg/s", better="higher")
        for step in ("addressed", "ambient"):
            report.add(f"{name}/{step} CPU ms per msg", result[step]["cpu ms/msg"])
        report.add(f"{name}/addressed msg per s", result["addressed"]["msg/s"], unit="msg/s", better="higher")
        for kind in ("acked", "stored"):
            value = result["ambient"][f"{kind} msg/s"]
            report.add(f"{name}/ambient {kind} msg per s", value, unit="msg/s", better="higher")
    report.note("load average", [round(x, 2) for x in load_before])
    Console(width=160).print(table)
    report.save()
    if profile is not None and profile_to is not None:
        profile.dump_stats(str(profile_to))
        print(f"profile of the SQLite run written to {profile_to}")


@contextlib.asynccontextmanager
async def own_schema(url: str | None) -> AsyncIterator[str | None]:
    """PostgreSQL: a fresh schema of our own (dropped afterwards), selected through search_path."""
    if url is None:
        yield None
        return
    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    schema = f"bench_throughput_{uuid.uuid4().hex[:8]}"
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield (
            make_url(url)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await engine.dispose()


def fmt_load(load: tuple[float, float, float] | Any) -> str:
    return " ".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="50 chats x 40 turns, 50 groups x 200 messages")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the SQLite run to this file")
    args = parser.parse_args()
    asyncio.run(main(args.full, args.profile))
