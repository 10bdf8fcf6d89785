"""Compressed transcripts through the real anthropic SDK to the fake Messages API server."""

from __future__ import annotations

import random

from agent.compaction import compact
from agent.context_engine import CompressionOutcome
from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.prompt_caching import apply_cache_control
from agent.provider import LLMRequest
from agent.settings import CompressionSettings, LLMSettings
from agent.types import AgentSession, ChatMessage, text_block
from tests.agent.conftest import assistant, persist, tool_round, user
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.memory_store import InMemoryStore


def random_transcript(seed: int) -> list[ChatMessage]:
    rng = random.Random(seed)
    out: list[ChatMessage] = []
    for turn in range(rng.randint(8, 30)):
        out.append(user(f"request {turn}: " + "words " * rng.randint(1, 200)))
        for _ in range(rng.randint(0, 3)):
            outputs = ["o" * rng.choice([5, 300, 3000]) for _ in range(rng.randint(1, 3))]
            out.extend(tool_round(outputs, split_results=rng.random() < 0.5))
        out.append(assistant(f"answer {turn}: " + "text " * rng.randint(1, 200)))
    return out


async def test_compressed_transcripts_are_accepted_by_the_api() -> None:
    async with FakeAnthropic() as fake:
        provider = AnthropicProvider(
            api_key="test", base_url=fake.base_url, settings=LLMSettings(max_retries=0)
        )
        try:
            for seed in range(6):
                session = AgentSession(
                    id=f"w{seed}", system_prompt="sys", model="claude-sonnet-4-6", context_window=8_000
                )
                store = InMemoryStore()
                await persist(store, session.id, random_transcript(seed))
                engine = ContextCompressor(
                    CompressionSettings(protect_last_n=4), provider, summary_model="claude-haiku-4-5"
                )
                result = await compact(engine, store, session, trigger="manual")
                assert result.outcome.status == "ok", result.outcome.reason
                system, messages = apply_cache_control(
                    [text_block(session.system_prompt)], [m.to_wire() for m in result.messages], ttl="5m"
                )
                reply = await provider.create(
                    LLMRequest(model=session.model, messages=messages, system=system, max_tokens=50)
                )
                assert reply.content
        finally:
            await provider.aclose()
    summary_requests = [r for r in fake.message_requests if "<transcript>" in str(r["messages"])]
    assert len(summary_requests) == 6
    assert all(r["model"] == "claude-haiku-4-5" for r in summary_requests)


async def _compact_through_the_fake(
    fake: FakeAnthropic, session: AgentSession, messages: list[ChatMessage], summary_model: str
) -> CompressionOutcome:
    provider = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
    try:
        store = InMemoryStore()
        await persist(store, session.id, messages)
        engine = ContextCompressor(CompressionSettings(), provider, summary_model=summary_model)
        return (await compact(engine, store, session, trigger="manual")).outcome
    finally:
        await provider.aclose()


async def test_the_summary_request_fits_a_summary_model_with_a_small_output_cap() -> None:
    session = AgentSession(id="cap", system_prompt="sys", model="claude-sonnet-4-6", context_window=200_000)
    async with FakeAnthropic() as fake:
        outcome = await _compact_through_the_fake(
            fake, session, random_transcript(3) * 8, "claude-3-5-haiku-20241022"
        )
    assert outcome.status == "ok", outcome.reason
    [request] = [r for r in fake.message_requests if "<transcript>" in str(r["messages"])]
    assert request["max_tokens"] <= 8_192


async def test_a_summary_refused_for_its_input_plus_max_tokens_is_retried_smaller_than_it_was() -> None:
    # The transcript (~47k tokens) is under the room we computed for the summary model, and
    # under its real window (50k) too, but not with the 15k max_tokens beside it: the retry must
    # cut the transcript that was sent, not the larger room it never filled.
    session = AgentSession(id="sum", system_prompt="sys", model="claude-sonnet-4-6", context_window=200_000)
    async with FakeAnthropic(windows={"claude-haiku-4-5": 50_000}) as fake:
        outcome = await _compact_through_the_fake(fake, session, random_transcript(6) * 3, "claude-haiku-4-5")
    assert outcome.status == "ok", outcome.reason
    first, second = [r for r in fake.message_requests if "<transcript>" in str(r["messages"])]
    assert fake.count_tokens(first) <= 50_000 < fake.count_tokens(first) + first["max_tokens"]
    assert fake.count_tokens(second) + second["max_tokens"] <= 50_000


async def test_a_cjk_transcript_is_sized_for_the_summary_models_own_window() -> None:
    # The main model has a 1M window (a deployment with the 1M beta); the summary model has 200k.
    session = AgentSession(id="cjk", system_prompt="sys", model="claude-sonnet-4-6", context_window=1_000_000)
    chinese = "我们需要把账单服务迁移到新的数据库集群并且保持服务不中断。" * 190  # ~5,700 characters
    messages = [
        user(f"第{i}段：{chinese}") if i % 2 == 0 else assistant(f"好的，第{i}段。") for i in range(240)
    ]
    async with FakeAnthropic(windows={"claude-sonnet-4-6": 1_000_000}) as fake:
        outcome = await _compact_through_the_fake(fake, session, messages, "claude-haiku-4-5")
    assert outcome.status == "ok", outcome.reason
    [request] = [r for r in fake.message_requests if "<transcript>" in str(r["messages"])]
    assert fake.count_tokens(request) <= 200_000 - request["max_tokens"]
    assert fake.count_tokens(request) >= 100_000  # sized to the window, not starved


async def test_a_summary_prompt_the_model_finds_too_long_is_retried_to_fit_its_limit() -> None:
    # The summary model answers with a smaller window than the table says (a proxy, a beta off).
    session = AgentSession(id="lim", system_prompt="sys", model="claude-sonnet-4-6", context_window=200_000)
    async with FakeAnthropic(windows={"claude-haiku-4-5": 30_000}) as fake:
        outcome = await _compact_through_the_fake(
            fake, session, random_transcript(5) * 12, "claude-haiku-4-5"
        )
    assert outcome.status == "ok", outcome.reason
    first, second = [r for r in fake.message_requests if "<transcript>" in str(r["messages"])]
    assert fake.count_tokens(first) > 30_000 >= fake.count_tokens(second)
