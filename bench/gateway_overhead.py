"""Gateway overhead per message: inbox commit -> agent call, with 1,000 active messages.

The real Gateway, store (SQLite in a temp dir; PostgreSQL too when HYGIEIA_TEST_POSTGRES_URL
is set), AgentLoop and ContextCompressor; the provider is the offline one, wrapped to stamp
the moment the agent calls it, so the numbers are the gateway's own work (claim, append,
dedupe check, load history, hygiene estimate, turn setup) and nothing of a model.

    python bench/gateway_overhead.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agent.offline import OfflineProvider
from agent.provider import LLMRequest, LLMResponse
from agent.types import ChatMessage
from gateway.config import Settings
from gateway.platforms.base import InboundHandler, InboundMessage, OutboundTarget, PlatformAdapter
from gateway.runner import Service


class StampingProvider(OfflineProvider):
    """The offline provider, noting when each chat call starts."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def create(self, request: LLMRequest) -> LLMResponse:
        if request.purpose == "chat":
            self.calls.append(time.perf_counter())
        return await super().create(request)


class NullAdapter(PlatformAdapter):
    name = "bench"

    def __init__(self) -> None:
        self.sent = 0

    async def start(self, handler: InboundHandler) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        self.sent += 1
        return [str(self.sent)]


async def measure(url: str, data_dir: Path, active: int, samples: int) -> dict[str, list[float]]:
    settings = Settings(data_dir=data_dir, database_url=url, allow_all_users=True)
    provider = StampingProvider()
    adapter = NullAdapter()
    service = await Service.build(settings, [adapter], provider=provider)
    await service.start()
    try:
        key = "bench:dm:c1"
        info = await service.store.get_or_create_session(
            key,
            platform="bench",
            chat_id="c1",
            system_prompt=settings.sessions.system_prompt,
            model=settings.model,
        )
        for i in range(active):
            make = ChatMessage.user if i % 2 == 0 else ChatMessage.assistant
            await service.store.append_message(
                info.id, make(f"message {i}: a sentence of ordinary chat text")
            )
        commit: list[float] = []
        to_call: list[float] = []
        for i in range(samples):
            msg = InboundMessage(
                platform="bench", chat_id="c1", user_id="u", text=f"question {i}", platform_message_id=f"b{i}"
            )
            started = time.perf_counter()
            await service.gateway.intake(msg)  # returns once the inbox row is committed
            committed = time.perf_counter()
            await service.gateway.wait_idle()
            commit.append((committed - started) * 1000)
            to_call.append((provider.calls[-1] - committed) * 1000)
        return {"intake (auth, clean, inbox commit)": commit, "inbox commit -> agent call": to_call}
    finally:
        await service.stop()


def row(name: str, values: list[float]) -> list[str]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return [name, f"{statistics.median(values):.2f}", f"{p95:.2f}", f"{max(values):.2f}"]


async def main(full: bool) -> None:
    active = 1000
    samples = 200 if full else 40
    targets = [("sqlite", None)]
    if os.environ.get("HYGIEIA_TEST_POSTGRES_URL"):
        targets.append(("postgresql", os.environ["HYGIEIA_TEST_POSTGRES_URL"]))
    table = Table(title=f"Gateway overhead per message, {active:,} active messages, {samples} samples (ms)")
    for column in ("database", "phase", "median", "p95", "max"):
        table.add_column(column, justify="right" if column in ("median", "p95", "max") else "left")
    for name, url in targets:
        with tempfile.TemporaryDirectory() as tmp:
            db_url = url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
            if url:
                print("note: PostgreSQL runs against", name, "and leaves its tables behind")
            results = await measure(db_url, Path(tmp), active, samples)
        for phase, values in results.items():
            table.add_row(name, *row(phase, values))
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="200 samples instead of 40")
    asyncio.run(main(parser.parse_args().full))
