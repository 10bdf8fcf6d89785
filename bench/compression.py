"""Compression benchmark: the non-LLM phases (prune + boundaries) on long transcripts with tool
rounds, the whole compaction with the offline (extractive) summarizer, and the extractive
fallback on pasted blobs with no spaces. Prints tables.

    python bench/compression.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import statistics
import string
import time

from rich.console import Console
from rich.table import Table

from agent.engines.compressor.boundaries import choose_boundaries
from agent.engines.compressor.engine import TARGET_FRACTION, ContextCompressor
from agent.engines.compressor.prune import prune_messages
from agent.extractive import extractive_summary
from agent.offline import OfflineProvider
from agent.settings import CompressionSettings
from agent.tokens import estimate_message_tokens
from agent.types import AgentSession, ChatMessage, ContentBlock, ContextState, text_block


def transcript(n: int, seed: int = 7) -> list[ChatMessage]:
    """About ``n`` persisted messages: questions, tool rounds (1-3 calls, long outputs), answers."""
    rng = random.Random(seed)
    out: list[ChatMessage] = []
    call = 0
    while len(out) < n:
        out.append(
            ChatMessage.user(f"please check the deploy log for service {len(out)} " * rng.randint(1, 8))
        )
        for _ in range(rng.randint(0, 3)):
            uses: list[ContentBlock] = []
            results: list[ContentBlock] = []
            for _ in range(rng.randint(1, 3)):
                call += 1
                uses.append(
                    {"type": "tool_use", "id": f"toolu_{call}", "name": "bash", "input": {"cmd": "ls"}}
                )
                body = "\n".join(f"line {i} " + "x" * 60 for i in range(rng.choice([2, 40, 200])))
                results.append({"type": "tool_result", "tool_use_id": f"toolu_{call}", "content": body})
            out.append(ChatMessage(role="assistant", content=[text_block("Checking."), *uses]))
            out.append(ChatMessage(role="user", content=results))
        out.append(ChatMessage.assistant("All good: " + "the service is healthy. " * rng.randint(1, 20)))
    return [dataclasses.replace(m, id=i + 1, seq=i + 1) for i, m in enumerate(out[:n])]


def run(size: int, window: int, repeats: int) -> dict[str, float]:
    messages = transcript(size)
    settings = CompressionSettings()
    threshold = int(window * settings.threshold)
    tokens = [estimate_message_tokens(m) for m in messages]
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        sizes = [estimate_message_tokens(m) for m in messages]
        bounds = choose_boundaries(
            messages,
            sizes,
            protect_head=True,
            tail_budget=int(threshold * settings.target_ratio),
            tail_floor=settings.protect_last_n,
            tail_cap=int(threshold * TARGET_FRACTION * 0.75),
            min_tail_users=settings.min_tail_user_messages,
        )
        pruned = prune_messages(
            messages, end=bounds.protect_start, prune_chars=settings.tool_result_prune_chars
        )
        timings.append(time.perf_counter() - started)
    after_prune = sum(estimate_message_tokens(m) for m in pruned.messages)
    session = AgentSession(
        id="bench", system_prompt="You are a bench.", model="claude-sonnet-4-6", context_window=window
    )
    engine = ContextCompressor(settings, OfflineProvider(), summary_model="claude-haiku-4-5")
    started = time.perf_counter()
    outcome = asyncio.run(engine.compress(session, messages, ContextState(), trigger="manual"))
    full_ms = (time.perf_counter() - started) * 1000
    return {
        "messages": len(messages),
        "before": sum(tokens),
        "after_prune": after_prune,
        "after_all": outcome.tokens_after,
        "pruned": len(pruned.changed),
        "phase12_ms": statistics.median(timings) * 1000,
        "full_ms": full_ms,
    }


def blobs(kind: str, chars: int = 32_000, seed: int = 3) -> list[ChatMessage]:
    """Three pasted blobs of ``chars`` characters with no spaces (the inputs that once went quadratic)."""
    rng = random.Random(seed)
    alphabet = {
        "one letter": "a",
        "word characters": string.ascii_letters + string.digits + "_",
        "dots and dashes": ".-",
        "base64": string.ascii_letters + string.digits + "+/",
    }[kind]
    return [
        ChatMessage.user(f"blob {i}: " + "".join(rng.choice(alphabet) for _ in range(chars)))
        for i in range(3)
    ]


def fallback_ms(messages: list[ChatMessage], repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        extractive_summary(messages, budget_tokens=2_000)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def fallback_table(repeats: int) -> Table:
    table = Table(title="Extractive fallback on 3 pasted blobs of 32,000 characters each")
    for column in ("blob", "characters", "extractive summary ms (median)"):
        table.add_column(column, justify="right")
    for kind in ("one letter", "word characters", "dots and dashes", "base64"):
        messages = blobs(kind)
        table.add_row(
            kind, f"{sum(len(m.text) for m in messages):,}", f"{fallback_ms(messages, repeats):.1f}"
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="larger transcripts and more repeats")
    args = parser.parse_args()
    run(100, 200_000, repeats=1)  # warm-up: imports, regex compilation
    cases = [(500, 200_000), (500, 1_000_000)] + ([(2_000, 200_000), (5_000, 1_000_000)] if args.full else [])
    table = Table(title="Compression (rough token estimates; offline extractive summary)")
    for column in (
        "messages",
        "window",
        "tokens before",
        "after prune",
        "after compact",
        "pruned outputs",
        "prune+bounds ms",
        "compress ms",
    ):
        table.add_column(column, justify="right")
    for size, window in cases:
        row = run(size, window, repeats=20 if args.full else 5)
        table.add_row(
            str(row["messages"]),
            f"{window:,}",
            f"{row['before']:,}",
            f"{row['after_prune']:,}",
            f"{row['after_all']:,}",
            str(row["pruned"]),
            f"{row['phase12_ms']:.1f}",
            f"{row['full_ms']:.1f}",
        )
    console = Console(width=160)
    console.print(table)
    console.print(fallback_table(repeats=20 if args.full else 5))
    print(
        "prune+bounds: median of repeated runs of phases 1-2 (no model); compress: one whole manual"
        " compaction with the offline extractive summarizer."
    )


if __name__ == "__main__":
    main()
