"""The built-in compressor's own outer limit (``context.timeout_seconds``): a summary model that
does not answer in time is abandoned and the extractive summary stands in, logged."""

from __future__ import annotations

import time

import pytest

from agent.compaction import compact
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.llm import AnthropicProvider
from agent.settings import CompressionSettings, LLMSettings
from tests.agent.loop_support import SUMMARY_MODEL, exchanges, make_session
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.memory_store import InMemoryStore


@pytest.mark.parametrize("trigger", ["hygiene", "manual"])
async def test_a_summary_past_the_time_limit_falls_back_to_the_extractive_one(
    trigger: str, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(context_window=20_000)
    store = InMemoryStore()
    for m in exchanges(12, chars=400):
        await store.append_message(session.id, m)
    async with FakeAnthropic() as fake:
        fake.model_delays[SUMMARY_MODEL] = 60.0  # the summary model hangs
        provider = AnthropicProvider(
            api_key="t", base_url=fake.base_url, settings=LLMSettings(max_retries=0, timeout_seconds=120)
        )
        try:
            engine = CostOrderedCompressor(
                CompressionSettings(protect_last_n=4),
                provider,
                summary_model=SUMMARY_MODEL,
                timeout_seconds=1.0,
            )
            started = time.monotonic()
            result = await compact(engine, store, session, trigger=trigger)  # type: ignore[arg-type]
            took = time.monotonic() - started
        finally:
            await provider.aclose()
    assert took < 10
    assert result.record is not None and result.record.status == "fallback"
    assert result.record.messages_archived > 0
    assert "past its 1 s limit (context.timeout_seconds): the extractive summary stands in" in caplog.text
