"""Overhead per turn of the OpenAI-compatible API, above the agent's own time.

The real service (``hygieia run --platform api`` as built by ``gateway.runner``: door listener,
key check, inbox, gateway, AgentLoop through the real Anthropic SDK, outbox or streamed reply)
on SQLite in a temp dir. The model is the fake Anthropic server of tests/fakes in its own process,
answering every call after a fixed ``--model-ms`` (the agent's own time, one model call per
turn). A client on the same machine sends one conversation's turns one after the other and
times each request from its first byte out to the last byte in (for a stream: ``data: [DONE]``).

overhead = request wall time - model time, p50 and p99, per endpoint:
``chat``: /v1/chat/completions; ``chat stream``: the same with ``stream: true``;
``responses``: /v1/responses with a named conversation.

    python bench/api_turns.py [--full] [--model-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _child_server import child_server
from _report import Report
from rich.console import Console
from rich.table import Table

from gateway.config import Settings
from gateway.platforms.http_api.adapter import ApiAdapter
from gateway.runner import Service, build_adapters

KEY = "bench-key-0123456789abcdefghijklmnop"
_FAKE = """
import asyncio, sys
from tests.fakes.anthropic import FakeAnthropic

async def main():
    fake = FakeAnthropic()
    fake.delay = float(sys.argv[1])
    async with fake:
        print(fake.base_url, flush=True)
        while True:
            await asyncio.sleep(5)
            fake.requests.clear()
            fake.usages.clear()

asyncio.run(main())
"""


def fake_anthropic(delay: float) -> contextlib.AbstractAsyncContextManager[str]:
    """The fake Anthropic server in a child process answering after ``delay`` s; yields its URL."""
    return child_server(_FAKE, str(delay))


def _body(case: str, turn: int) -> tuple[str, dict[str, Any]]:
    text = f"turn {turn}: how is the garden doing today?"
    if case == "responses":
        return "/responses", {"model": "hygieia", "input": text, "conversation": "bench-responses"}
    body: dict[str, Any] = {"model": "hygieia", "messages": [{"role": "user", "content": text}]}
    body["user"] = "bench-stream" if case == "chat stream" else "bench-chat"
    if case == "chat stream":
        body["stream"] = True
    return "/chat/completions", body


async def _turn(http: httpx.AsyncClient, case: str, turn: int) -> float:
    path, body = _body(case, turn)
    started = time.perf_counter()
    if case == "chat stream":
        async with http.stream("POST", path, json=body) as answer:
            tail = b""
            async for chunk in answer.aiter_bytes():
                tail = (tail + chunk)[-64:]
            if answer.status_code != 200 or b"[DONE]" not in tail:
                raise RuntimeError(f"{case}: {answer.status_code}")
    else:
        answer = await http.post(path, json=body)
        if answer.status_code != 200:
            raise RuntimeError(f"{case}: {answer.status_code} {answer.text[:200]}")
    return time.perf_counter() - started


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run(turns: int, model_ms: float) -> list[tuple[str, list[float], list[float]]]:
    rows: list[tuple[str, list[float], list[float]]] = []
    model = model_ms / 1000
    with tempfile.TemporaryDirectory(prefix="hygieia-api-bench-") as tmp:
        async with fake_anthropic(model) as base_url:
            settings = Settings(
                data_dir=Path(tmp),
                anthropic_api_key="bench",
                anthropic_base_url=base_url,
                model="claude-sonnet-4-6",
                api_keys=f"bench={KEY}",
                api={"host": "127.0.0.1", "port": 0},
            )
            service = await Service.build(settings, build_adapters(settings, ["api"]))
            adapter = next(a for a in service.adapters if isinstance(a, ApiAdapter))
            async with service:
                url = f"http://127.0.0.1:{adapter.door.port}/v1"
                headers = {"Authorization": f"Bearer {KEY}"}
                async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
                    for case in ("chat", "chat stream", "responses"):
                        for turn in range(5):  # warm-up: connections, caches, first session
                            await _turn(http, case, -turn - 1)
                        walls = [await _turn(http, case, turn) for turn in range(turns)]
                        overheads = [max(0.0, w - model) for w in walls]
                        rows.append((case, walls, overheads))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="1,000 turns per endpoint (default 150)")
    parser.add_argument("--model-ms", type=float, default=50.0, help="the fake model's time per call")
    args = parser.parse_args()
    turns = 1000 if args.full else 150
    rows = asyncio.run(run(turns, args.model_ms))
    report = Report("api_turns", full=args.full)
    table = Table(
        title=f"API turn overhead above the model's {args.model_ms:g} ms ({turns} turns each, SQLite)"
    )
    for column in ("endpoint", "wall p50 ms", "overhead p50 ms", "overhead p99 ms", "overhead mean ms"):
        table.add_column(column, justify="left" if column == "endpoint" else "right")
    for case, walls, overheads in rows:
        p50, p99 = _percentile(overheads, 0.5) * 1000, _percentile(overheads, 0.99) * 1000
        table.add_row(
            case,
            f"{_percentile(walls, 0.5) * 1000:.1f}",
            f"{p50:.1f}",
            f"{p99:.1f}",
            f"{statistics.fmean(overheads) * 1000:.1f}",
        )
        report.add(f"sqlite/{case}/overhead p50", p50)
        report.add(f"sqlite/{case}/overhead p99", p99)
    report.note("turns", turns)
    report.note("model ms", args.model_ms)
    Console().print(table)
    report.save()


if __name__ == "__main__":
    main()
