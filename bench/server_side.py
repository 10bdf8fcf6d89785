"""Server-side clearing on the tool-heavy bench transcript: what the API is sent, what it caches,
what the chat calls cost, and how many of our own compactions it spares.

The transcript is replayed round by round (a user request, its tool rounds, the answer) into an
in-memory store; after each round one chat request is built from the active view as the loop
builds it (prompt caching on, the engine shaping it) and sent through the real SDK to the fake
Anthropic server, which applies the ``clear_tool_uses`` edit as documented and accounts the
prompt cache by prefix. Before each round the engine is asked whether to compact, as the loop
asks it. Compared: the default pipeline without and with ``compression.server_clear_tool_uses``.

    python bench/server_side.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses

import _root  # noqa: F401  (the checkout on sys.path, for tests.fakes)
from _report import Report
from _transcripts import transcript
from context_engines import CountingSummarizer, rounds
from rich.console import Console
from rich.table import Table

from agent.compaction import compact
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.llm import AnthropicProvider
from agent.loop_request import build_request
from agent.settings import DEFAULT_SUMMARY_MODEL, CompressionSettings, LLMSettings
from agent.tokens import cost_usd
from agent.tools import default_registry
from agent.types import AgentSession, ChatMessage
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.memory_store import InMemoryStore

MODEL = "claude-sonnet-4-6"


@dataclasses.dataclass
class Result:
    calls: int = 0
    sent: int = 0  # prompt tokens the model read (after the API's edits)
    cache_read: int = 0
    cache_write: int = 0
    chat_cost: float = 0.0
    compactions: int = 0
    summary_calls: int = 0
    cleared: int = 0


async def replay(
    rounds_: list[list[ChatMessage]], window: int, *, clearing: bool, prune: bool = True
) -> Result:
    strategies = [s for s in CompressionSettings().strategies if prune or s != "prune"]
    settings = CompressionSettings(
        server_clear_tool_uses=clearing, server_clear_at=0.25, strategies=strategies
    )
    summarizer = CountingSummarizer()
    engine = CostOrderedCompressor(settings, summarizer, summary_model=DEFAULT_SUMMARY_MODEL)
    session = AgentSession("b", "You are a coding agent.", MODEL, window)
    store = InMemoryStore()
    tools = default_registry().definitions()
    result = Result()
    async with FakeAnthropic(context_window=window, min_cacheable_tokens=1024) as fake:
        chat = AnthropicProvider(api_key="bench", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
        try:
            for chunk in rounds_:
                for m in chunk:
                    await store.append_message(session.id, m)
                state = await store.load_context_state(session.id)
                view = await store.load_active(session.id)
                size = engine.estimate_prompt_tokens(session, state, view)
                if engine.should_compress(session, state, size, trigger="in_loop"):
                    done = await compact(engine, store, session, trigger="in_loop", prompt_tokens=size)
                    result.compactions += bool(done.records)
                    view = await store.load_active(session.id)
                request, _ = build_request(session, view, tools, max_tokens=1024, cache_ttl="5m")
                response = await chat.create(engine.shape_request(session, state, request))
                engine.on_response(session, state, response)
                await store.save_context_state(session.id, state)
                usage = response.usage
                result.calls += 1
                result.sent += usage.context_tokens
                result.cache_read += usage.cache_read_input_tokens
                result.cache_write += usage.cache_creation_input_tokens
                result.chat_cost += cost_usd(MODEL, usage)
                result.cleared += sum(e.cleared_input_tokens for e in response.applied_edits)
        finally:
            await chat.aclose()
    result.summary_calls = summarizer.calls
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args()
    size, window = (2000, 200_000) if args.full else (400, 48_000)
    chunks = rounds(transcript(size))
    report = Report("server_side", full=args.full)
    table = Table(title=f"server-side clearing: {size} messages (tool-heavy), window {window:,}")
    for column in (
        "clearing",
        "calls",
        "tokens sent",
        "cache read",
        "cache write",
        "chat cost",
        "cleared",
        "compactions",
        "summary calls",
    ):
        table.add_column(column, justify="left" if column == "clearing" else "right")
    variants = {"off": (False, True), "on": (True, True), "on, no local prune": (True, False)}
    results: dict[str, Result] = {}
    for label, (clearing, prune) in variants.items():
        r = asyncio.run(replay(chunks, window, clearing=clearing, prune=prune))
        results[label] = r
        table.add_row(
            label,
            str(r.calls),
            f"{r.sent:,}",
            f"{r.cache_read:,}",
            f"{r.cache_write:,}",
            f"${r.chat_cost:.3f}",
            f"{r.cleared:,}",
            str(r.compactions),
            str(r.summary_calls),
        )
    for label, r in results.items():
        key = label.replace(", ", "/").replace(" ", "-")
        report.add(f"{key}/tokens sent", r.sent, unit="tokens")
        report.add(f"{key}/chat cost", r.chat_cost, unit="usd")
        report.note(f"{key}/cleared tokens", r.cleared)
        report.note(f"{key}/compactions", r.compactions)
        report.note(f"{key}/summary calls", r.summary_calls)
    Console(width=160).print(table)
    report.save()


if __name__ == "__main__":
    main()
