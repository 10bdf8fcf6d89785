"""The context budget moves hygiene's threshold: a 1M-token model stays cheap per turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.settings import CompressionSettings, LLMSettings
from agent.tokens import estimate_messages_tokens
from agent.types import AgentSession, ChatMessage
from gateway.serving.hygiene import run_hygiene
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.memory_store import InMemoryStore

MODEL = "claude-sonnet-5-5"


@dataclass
class Bed:
    store: InMemoryStore
    engine: ContextCompressor
    settings: CompressionSettings


@pytest.fixture
async def bed() -> AsyncIterator[Bed]:
    async with FakeAnthropic() as fake:
        provider = AnthropicProvider(api_key="k", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
        settings = CompressionSettings()
        try:
            yield Bed(
                InMemoryStore(),
                ContextCompressor(settings, provider, summary_model="claude-haiku-5-5"),
                settings,
            )
        finally:
            await provider.aclose()


async def _session_at(bed: Bed, tokens: int, *, budget: int | None) -> AgentSession:
    """A 1M-window session whose stored history the API has just counted as ``tokens``."""
    session = AgentSession("s1", "You are terse.", MODEL, 1_000_000, key="k", budget_tokens=budget)
    for i in range(30):
        message = ChatMessage.user if i % 2 == 0 else ChatMessage.assistant
        await bed.store.append_message(session.id, message(f"{i}: " + "lorem ipsum " * 40))
    state = await bed.store.load_context_state(session.id)
    state.last_prompt_tokens = tokens
    state.last_prompt_estimate = estimate_messages_tokens(await bed.store.load_active(session.id))
    state.token_scale_model = MODEL
    await bed.store.save_context_state(session.id, state)
    return session


async def test_a_1m_model_with_a_200k_budget_compacts_at_170k_on_hygiene(bed: Bed) -> None:
    session = await _session_at(bed, 170_000, budget=200_000)
    report = await run_hygiene(bed.engine, bed.store, session, bed.settings)
    assert (report.limit, report.status) == (170_000, "compacted")


async def test_just_under_85_percent_of_the_budget_does_not_fire(bed: Bed) -> None:
    session = await _session_at(bed, 169_000, budget=200_000)
    report = await run_hygiene(bed.engine, bed.store, session, bed.settings)
    assert (report.limit, report.status) == (170_000, "below")


async def test_without_a_budget_the_whole_window_is_the_room(bed: Bed) -> None:
    session = await _session_at(bed, 170_000, budget=None)
    report = await run_hygiene(bed.engine, bed.store, session, bed.settings)
    assert (report.limit, report.status) == (850_000, "below")


def test_the_in_loop_threshold_is_half_the_budget(bed: Bed) -> None:
    session = AgentSession("s", "sys", MODEL, 1_000_000, budget_tokens=200_000)
    assert bed.engine.threshold_tokens(session) == 100_000
    assert bed.engine.threshold_tokens(session, "hygiene") == 170_000
