"""Compressed transcripts through the real anthropic SDK to the fake Messages API server."""

from __future__ import annotations

import random

from agent.compaction import compact
from agent.compressor import ContextCompressor
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
