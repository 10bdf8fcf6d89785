"""The quiet-hours sweep's effect: the morning's first message after a night of ambient group traffic.

A group chat grows to ~90% of the window overnight with nobody addressing the bot. In the
morning someone does. Without the sweep, hygiene must compact the whole night before the
model can answer; with it, the sweep compacted the session at 03:00 and the first message
pays only its own turn. The real service (``Service.build``: gateway, agent loop, compressor,
SQLite store, the ``sweep`` job itself) talks to the fake Anthropic server, which answers a
summary after a realistic delay (a cheap model reading tens of thousands of tokens) and a
chat turn after a shorter one.

    python bench/sweep.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fakes, run from anywhere

from agent.llm import AnthropicProvider
from agent.loop_request import estimate_request_tokens
from agent.prompts import SUMMARIZER_SYSTEM
from agent.settings import LLMSettings
from agent.types import AgentSession, ChatMessage, ContextState
from gateway.config import Settings
from gateway.platforms.base import InboundHandler, InboundMessage, OutboundTarget, PlatformAdapter
from gateway.runner import Service
from tests.fakes.anthropic import Answer, FakeAnthropic, summary_text, text_reply

MODEL = "claude-sonnet-4-6"
AMBIENT = "I think the deploy went fine but the dashboard still shows the old numbers for the EU region "


class WaitingAdapter(PlatformAdapter):
    """Records when each reply is handed to the platform."""

    name = "bench"

    def __init__(self) -> None:
        self.sent: list[tuple[float, str]] = []
        self.arrived = asyncio.Event()

    async def start(self, handler: InboundHandler) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        self.sent.append((time.perf_counter(), text))
        self.arrived.set()
        return [str(len(self.sent))]


class SlowModel:
    """Summaries take ``summary_delay`` seconds, chat turns ``chat_delay``."""

    def __init__(self, summary_delay: float, chat_delay: float) -> None:
        self.summary_delay = summary_delay
        self.chat_delay = chat_delay
        self.summaries = 0

    async def __call__(self, body: dict[str, Any]) -> Answer:
        system = body.get("system") or []
        text = system if isinstance(system, str) else " ".join(str(b.get("text", "")) for b in system)
        if text.startswith(SUMMARIZER_SYSTEM[:60]):
            self.summaries += 1
            await asyncio.sleep(self.summary_delay)
            return text_reply(summary_text("the night's discussion of the EU dashboard"))
        await asyncio.sleep(self.chat_delay)
        return text_reply("Good morning: the deploy went fine; the EU dashboard lagged behind overnight.")


async def one_morning(
    tmp: Path, window: int, model: SlowModel, fake: FakeAnthropic, *, sweep: bool
) -> dict[str, float]:
    settings = Settings(
        data_dir=tmp,
        database_url=f"sqlite+aiosqlite:///{tmp / 'bench.db'}",
        allow_all_users=True,
        model=MODEL,
        context_window=window,
        anthropic_api_key="bench",
    )
    provider = AnthropicProvider(api_key="bench", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
    adapter = WaitingAdapter()
    service = await Service.build(settings, [adapter], provider=provider)
    await service.start()
    try:
        info = await service.store.get_or_create_session(
            "bench:group:team",
            platform="bench",
            chat_id="team",
            system_prompt=settings.sessions.system_prompt,
            model=MODEL,
        )
        # The night: ambient chatter until the persisted context is ~90% of the window.
        session = AgentSession(info.id, info.system_prompt, MODEL, window, key=info.key, platform="bench")
        tools = service.agent.tools.definitions()
        i = 0
        while (
            estimate_request_tokens(session, await service.store.load_active(info.id), tools, ContextState())
            < 0.9 * window
        ):
            for _ in range(50):
                i += 1
                text = f"[member{i % 7}, 01:{i % 60:02d} UTC] {i}: {AMBIENT * 3}"
                await service.store.append_message(info.id, ChatMessage.user(text))
        night = 0.0
        if sweep:
            [job] = [j for j in service.scheduler.jobs if j.name == "sweep"]
            three_am = (datetime.now(UTC) + timedelta(days=1)).replace(hour=3, minute=0)
            started = time.perf_counter()
            report = await job.run(three_am)
            night = time.perf_counter() - started
            assert report.get("compacted") == 1, report
        before = model.summaries
        started = time.perf_counter()
        await service.gateway.intake(
            InboundMessage(
                platform="bench",
                chat_id="team",
                user_id="ann",
                text="@bot good morning, what did I miss?",
                platform_message_id="morning",
                chat_type="group",
                addressed=True,
            )
        )
        await asyncio.wait_for(adapter.arrived.wait(), 600)
        latency = adapter.sent[0][0] - started
        return {"latency": latency, "night": night, "morning_summaries": model.summaries - before}
    finally:
        await service.stop()
        await provider.aclose()


async def main(full: bool) -> None:
    window = 200_000 if full else 50_000
    samples = 5 if full else 3
    summary_delay, chat_delay = (8.0, 1.5) if full else (4.0, 1.0)
    model = SlowModel(summary_delay, chat_delay)
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    async with FakeAnthropic(context_window=window, responder=model) as fake:
        for _ in range(samples):
            for sweep in (False, True):
                with tempfile.TemporaryDirectory() as tmp:
                    results[sweep].append(await one_morning(Path(tmp), window, model, fake, sweep=sweep))
    table = Table(
        title=(
            f"First message after a night of ambient traffic ({window:,}-token window at ~90%; fake model: "
            f"summary {summary_delay:g} s, chat turn {chat_delay:g} s; {samples} mornings each)"
        )
    )
    for column in (
        "sweep",
        "first reply (s, median)",
        "max",
        "summaries in the morning",
        "sweep at 03:00 (s)",
    ):
        table.add_column(column, justify="left" if column == "sweep" else "right")
    for sweep in (False, True):
        rows = results[sweep]
        latencies = [r["latency"] for r in rows]
        table.add_row(
            "on" if sweep else "off",
            f"{statistics.median(latencies):.2f}",
            f"{max(latencies):.2f}",
            f"{statistics.mean(r['morning_summaries'] for r in rows):g}",
            f"{statistics.median(r['night'] for r in rows):.2f}" if sweep else "-",
        )
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--full", action="store_true", help="a 200,000-token window, slower summaries, 5 mornings"
    )
    asyncio.run(main(parser.parse_args().full))
