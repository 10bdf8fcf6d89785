"""The extractive summary's cost: linear in the text, whatever the text is made of.

Pasted blobs (a minified bundle, a run of one character, an id list with no spaces) once sent
the fact and e-mail patterns into quadratic backtracking: three 32k-character blobs took
seconds, on the event loop. Scaling is checked as a ratio (n vs 8n), never a wall-clock limit.
"""

from __future__ import annotations

import asyncio
import random
import string
import time

from agent.engines.compressor.engine import ContextCompressor
from agent.errors import Overloaded
from agent.extractive import extractive_summary
from agent.settings import CompressionSettings
from agent.types import AgentSession, ChatMessage, ContextState
from tests.agent.conftest import ScriptedSummarizer, conversation
from tests.agent.engines.compressor.test_engine import numbered


def blobs(chars: int, seed: int = 3) -> list[ChatMessage]:
    """Three pasted blobs with no spaces: one letter repeated, word characters, dots and dashes."""
    rng = random.Random(seed)
    word = "".join(rng.choice(string.ascii_letters + string.digits + "_") for _ in range(chars))
    return [
        ChatMessage.user("here is the first one: " + "a" * chars),
        ChatMessage.user("and the bundle: " + word),
        ChatMessage.user("and the separator line: " + "-." * (chars // 2)),
    ]


def _best_of(runs: int, chars: int) -> float:
    messages = blobs(chars)
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        extractive_summary(messages, budget_tokens=2_000)
        best = min(best, time.perf_counter() - started)
    return best


def test_the_extractive_summary_grows_linearly_with_pasted_blobs() -> None:
    small, large = _best_of(5, 4_000), _best_of(5, 32_000)
    assert large / small < 24  # linear: about 8; the quadratic patterns gave about 64


async def test_a_big_extractive_fallback_runs_off_the_event_loop() -> None:
    session = AgentSession(id="b", system_prompt="sys", model="claude-sonnet-4-6", context_window=20_000)
    engine = ContextCompressor(
        CompressionSettings(protect_last_n=4), ScriptedSummarizer(Overloaded("busy")), summary_model="m"
    )
    messages = numbered([*conversation(3), *blobs(32_000), *conversation(3)])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    running = asyncio.create_task(ticker())
    try:
        outcome = await engine.compress(session, messages, ContextState(), trigger="reactive")
        during = ticks
    finally:
        running.cancel()
    assert outcome.status == "fallback"
    assert during > 0  # the loop kept turning while the fallback was written
