"""Estimate error: the loop's token estimate of each request against what the API counts.

A long scripted conversation with tool rounds runs through the real loop and compressor,
the real SDK and the fake Anthropic server, whose usage is realistic: message characters / 4,
a CJK character one token, tool definitions, and the API's tool-use preamble. Before every
chat call the estimate the loop would use (``estimate_request_tokens`` with the session's
saved state) is compared with the real count of that very request. Prints a table.

    python bench/estimate_error.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import _root  # noqa: F401  (first: puts tests/fakes on the path)
from rich.console import Console
from rich.table import Table

from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.loop_request import estimate_request_tokens
from agent.provider import LLMRequest, LLMResponse
from agent.settings import CompressionSettings, LLMSettings
from agent.tools import FunctionTool, ToolContext, ToolRegistry, default_registry
from agent.types import AgentSession, ChatMessage
from tests.fakes.anthropic import FakeAnthropic, is_summary_request, summary_text, text_reply, tool_use_reply
from tests.fakes.memory_store import InMemoryStore

MODEL, SUMMARY_MODEL = "claude-sonnet-4-6", "claude-haiku-4-5"
WORDS = ("deploy", "cache", "river", "lantern", "orbit", "maple", "quartz", "signal", "harbor", "velvet")
CJK = "部署缓存河流灯笼轨道枫树石英信号港口天鹅绒铜草地密码猎鹰余烬冰川像素苔原山顶账本棱镜锚信标"


def sentence(rng: random.Random, chars: int, *, cjk: bool = False) -> str:
    if cjk:
        return "".join(rng.choice(CJK) for _ in range(chars // 3)) + "。"
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


async def fetch(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
    """A deployer's tool: a few KB of deterministic 'file' content."""
    rng = random.Random(str(tool_input.get("path")))
    return "\n".join(f"{n:4d}  {sentence(rng, 70)}" for n in range(rng.randint(30, 70)))


@dataclass
class Recorder:
    """A provider in front of the real one: notes (estimate, real) for every chat call."""

    inner: AnthropicProvider
    store: InMemoryStore
    session: AgentSession
    pairs: list[tuple[int, int]] = field(default_factory=list)
    name: str = "recorder"

    async def create(self, request: LLMRequest) -> LLMResponse:
        estimate = None
        if request.purpose == "chat":
            state = await self.store.load_context_state(self.session.id)
            view = [
                ChatMessage(
                    role=m["role"],
                    content=[{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
                )
                for m in request.messages
            ]
            estimate = estimate_request_tokens(self.session, view, request.tools, state)
        response = await self.inner.create(request)
        if estimate is not None:
            self.pairs.append((estimate, response.usage.context_tokens))
        return response

    async def count_tokens(self, request: LLMRequest) -> int | None:
        return await self.inner.count_tokens(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _answer(replies: list[Any]) -> Any:
    def respond(body: dict[str, Any]) -> Any:
        if is_summary_request(body):
            return text_reply(summary_text("the conversation"))
        return replies.pop(0) if replies else text_reply("ok")

    return respond


@dataclass
class Run:
    """One conversation: the loop over the recorder over the SDK against the fake."""

    fake: FakeAnthropic
    loop: AgentLoop
    recorder: Recorder
    session: AgentSession
    replies: list[Any]
    compactions: int = 0

    async def turn(self, text: str) -> None:
        result = await self.loop.run_turn(self.session, message=ChatMessage.user(text))
        self.compactions += len(result.compactions)

    def result(self, last_only: bool = False) -> dict[str, Any]:
        pairs = self.recorder.pairs[-1:] if last_only else self.recorder.pairs
        return {"pairs": pairs, "compactions": self.compactions, "rejected": self.fake.counts["errors"]}


@asynccontextmanager
async def conversation(window: int, tools: ToolRegistry) -> AsyncIterator[Run]:
    replies: list[Any] = []
    session = AgentSession("bench", "You are a helpful assistant. Answer briefly.", MODEL, window, key="b")
    store = InMemoryStore()
    llm = LLMSettings(max_retries=0)
    async with FakeAnthropic(context_window=window, responder=_answer(replies)) as fake:
        inner = AnthropicProvider(api_key="x", base_url=fake.base_url, settings=llm)
        recorder = Recorder(inner, store, session)
        engine = ContextCompressor(CompressionSettings(), recorder, summary_model=SUMMARY_MODEL)
        loop = AgentLoop(recorder, store, engine, llm=llm, tools=tools)
        try:
            yield Run(fake, loop, recorder, session, replies)
        finally:
            await recorder.aclose()


async def scripted(turns: int, window: int, *, cjk_every: int = 0, seed: int = 7) -> dict[str, Any]:
    """``turns`` user turns, some with one or two tool rounds; every ``cjk_every``-th turn in Chinese."""
    rng = random.Random(seed)
    tools = default_registry()
    tools.register(
        FunctionTool(
            "fetch",
            "Read a file.",
            {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            fetch,
        )
    )
    async with conversation(window, tools) as run:
        for t in range(turns):
            cjk = bool(cjk_every) and t % cjk_every == cjk_every - 1
            text = f"turn {t}: " + sentence(rng, rng.randint(80, 600), cjk=cjk)
            for k in range(rng.choices([0, 1, 2], weights=[5, 4, 1])[0]):
                run.replies.append(tool_use_reply("fetch", {"path": f"/srv/t{t}-{k}.txt"}))
            run.replies.append(text_reply(f"answer {t}: " + sentence(rng, rng.randint(100, 900), cjk=cjk)))
            await run.turn(text)
        return run.result()


SMALL_TURNS = {
    "en": ("hello", "what can you do?", "thanks, one moment"),
    "zh": ("你好", "你能做什么？", "谢谢，请稍等"),
}


async def paste(window: int, chars: int, *, turns: str = "en", cjk: bool = False) -> dict[str, Any]:
    """Three small turns, then one pasted document of about ``chars`` characters (its call is the row)."""
    async with conversation(window, default_registry()) as run:
        for text in SMALL_TURNS[turns]:
            await run.turn(text)
        document = "".join(sentence(random.Random(i), 300, cjk=cjk) for i in range(chars // 100))[:chars]
        await run.turn("please read this:\n" + document)
        return run.result(last_only=True)


def row(name: str, result: dict[str, Any], seconds: float) -> list[str]:
    ratios = sorted(est / real for est, real in result["pairs"])
    deciles = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else ratios * 9
    ahead = sum(1 for r in ratios if r > 1.10)
    return [
        name,
        str(len(ratios)),
        f"{statistics.median(ratios):.2f}",
        f"{deciles[0]:.2f}",
        f"{deciles[-1]:.2f}",
        f"{min(ratios):.2f}",
        f"{max(ratios):.2f}",
        str(ahead),
        str(result["compactions"]),
        str(result["rejected"]),
        f"{seconds:.1f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="500 turns instead of 200")
    args = parser.parse_args()
    turns = 500 if args.full else 200
    cases = [
        (f"{turns} turns, tools, 50k window", lambda: scripted(turns, 50_000)),
        (f"{turns} turns, tools, every 3rd in Chinese", lambda: scripted(turns, 50_000, cjk_every=3)),
        ("3 small turns + 100k-char paste, 200k window", lambda: paste(200_000, 100_000)),
        ("3 Chinese turns + 30k-char Chinese paste", lambda: paste(200_000, 30_000, turns="zh", cjk=True)),
        ("3 Chinese turns + 100k-char English paste", lambda: paste(200_000, 100_000, turns="zh")),
    ]
    table = Table(title="Token estimate / real count, per chat call (fake API with realistic usage)")
    columns = ("run", "calls", "median", "p10", "p90", "min", "max", "> 1.10", "compactions", "400s", "s")
    for column in columns:
        table.add_column(column, justify="right")
    for name, case in cases:
        started = time.perf_counter()
        result = asyncio.run(case())
        table.add_row(*row(name, result, time.perf_counter() - started))
    Console(width=160).print(table)
    print(
        "estimate: what the loop would estimate for the request from the saved state; real: the fake's"
        " count of the same request (input + cache write + cache read). '> 1.10': calls estimated more"
        " than 10% above the real size (the estimate running ahead: early compaction)."
    )


if __name__ == "__main__":
    main()
