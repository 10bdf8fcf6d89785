"""Context engines on the bench transcripts: how many compactions the cost-ordered pipeline
serves without a model call, what each strategy frees, and the summary calls (and their cost)
it saves against today's compressor alone (the summary strategy by itself).

Each transcript is replayed round by round (a user request, its tool rounds, the answer) into
an in-memory store; before each round the engine is asked, as the loop asks it, whether the
prompt calls for a compaction, and if so :func:`agent.compaction.compact` runs it. The summary
model is a stand-in that answers at once with a fixed summary and counts the calls.

    python bench/context_engines.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from collections import Counter
from collections.abc import Sequence

import _root  # noqa: F401  (the checkout on sys.path, for tests.fakes)
from _report import Report
from _transcripts import transcript
from rich.console import Console
from rich.table import Table

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.provider import LLMRequest, LLMResponse
from agent.settings import DEFAULT_SUMMARY_MODEL, CompressionSettings
from agent.tokens import cost_usd, estimate_text_tokens
from agent.types import AgentSession, ChatMessage, Usage, text_block
from tests.fakes.memory_store import InMemoryStore

SUMMARY = (
    "## Goal\nKeep the service healthy.\n## Done\n- checked the logs\n## In Progress\n- none\n"
    "## Pending\n- none\n## Resolved\n- none\n## Key facts\n- the retry logic backs off\n"
)


class CountingSummarizer:
    """A summary model that answers at once; counts calls and their (estimated) cost."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0
        self.cost = 0.0

    async def create(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        prompt = sum(
            estimate_text_tokens(str(b.get("text", ""))) for m in request.messages for b in m["content"]
        )
        usage = Usage(input_tokens=prompt, output_tokens=estimate_text_tokens(SUMMARY))
        self.cost += cost_usd(request.model, usage)
        return LLMResponse(
            content=[text_block(SUMMARY)], stop_reason="end_turn", usage=usage, model=request.model
        )

    async def count_tokens(self, request: LLMRequest) -> int | None:
        return None

    async def aclose(self) -> None:
        return None


def rounds(messages: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    """The transcript cut where a person speaks."""
    out: list[list[ChatMessage]] = []
    for m in messages:
        human = m.role == "user" and not m.tool_result_ids()
        if human or not out:
            out.append([])
        out[-1].append(dataclasses.replace(m, id=None, seq=None))
    return out


def chat_only(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The same conversation without its tool rounds (a chat-only deployment)."""
    kept = [m for m in messages if not m.tool_use_ids() and not m.tool_result_ids()]
    return [dataclasses.replace(m, content=[b for b in m.content if b.get("type") == "text"]) for m in kept]


@dataclasses.dataclass
class Result:
    compactions: int = 0
    without_llm: int = 0
    summary_calls: int = 0
    summary_cost: float = 0.0
    runs: Counter[str] = dataclasses.field(default_factory=Counter)
    freed: Counter[str] = dataclasses.field(default_factory=Counter)


async def replay(messages: list[ChatMessage], window: int, *, pipeline: bool) -> Result:
    settings = CompressionSettings()
    summarizer = CountingSummarizer()
    engine: ContextCompressor
    if pipeline:
        engine = CostOrderedCompressor(settings, summarizer, summary_model=DEFAULT_SUMMARY_MODEL)
    else:
        engine = ContextCompressor(settings, summarizer, summary_model=DEFAULT_SUMMARY_MODEL)
    session = AgentSession(
        id="b", system_prompt="You are a coding agent.", model="claude-sonnet-4-6", context_window=window
    )
    store = InMemoryStore()
    result = Result()
    for chunk in rounds(messages):
        for m in chunk:
            await store.append_message(session.id, m)
        state = await store.load_context_state(session.id)
        view = await store.load_active(session.id)
        size = engine.estimate_prompt_tokens(session, state, view)
        if not engine.should_compress(session, state, size, trigger="in_loop"):
            continue
        calls = summarizer.calls
        done = await compact(engine, store, session, trigger="in_loop", prompt_tokens=size, messages=view)
        if not done.records:
            continue
        result.compactions += 1
        result.without_llm += summarizer.calls == calls
        for record in done.records:
            result.runs[record.strategy] += 1
            result.freed[record.strategy] += record.tokens_freed
    result.summary_calls, result.summary_cost = summarizer.calls, summarizer.cost
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args()
    size, window = (4000, 200_000) if args.full else (600, 48_000)
    tools = transcript(size)
    cases = {"tool-heavy": tools, "chat-only": chat_only(transcript(size * 3, seed=12))}
    report = Report("context_engines", full=args.full)
    table = Table(title=f"context engines: {size} messages per transcript, window {window:,}")
    for column in (
        "transcript",
        "engine",
        "compactions",
        "no LLM call",
        "summary calls",
        "summary cost",
        "freed by strategy",
    ):
        table.add_column(
            column, justify="right" if column not in ("transcript", "engine", "freed by strategy") else "left"
        )
    for name, messages in cases.items():
        baseline = asyncio.run(replay(messages, window, pipeline=False))
        ordered = asyncio.run(replay(messages, window, pipeline=True))
        for label, r in (("compressor alone", baseline), ("cost-ordered", ordered)):
            share = r.without_llm / r.compactions if r.compactions else 0.0
            freed = ", ".join(f"{k} {v:,} ({r.runs[k]}x)" for k, v in r.freed.items())
            table.add_row(
                name,
                label,
                str(r.compactions),
                f"{share:.0%}",
                str(r.summary_calls),
                f"${r.summary_cost:.3f}",
                freed,
            )
        saved = baseline.summary_calls - ordered.summary_calls
        report.add(
            f"{name}/no-llm share",
            100 * (ordered.without_llm / ordered.compactions if ordered.compactions else 0),
            unit="%",
            better="higher",
        )
        report.add(f"{name}/summary calls", ordered.summary_calls, unit="calls")
        report.note(f"{name}/summary calls, compressor alone", baseline.summary_calls)
        report.note(f"{name}/summary calls saved", saved)
        report.note(f"{name}/summary cost saved usd", round(baseline.summary_cost - ordered.summary_cost, 4))
        for strategy, tokens in ordered.freed.items():
            report.note(f"{name}/freed/{strategy}", tokens)
    Console().print(table)
    report.save()


if __name__ == "__main__":
    main()
