"""Streaming over the real SDK against the fake server's event stream (as the Messages API sends it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.errors import Overloaded, ProviderUnreachable
from agent.llm import AnthropicProvider
from agent.llm_stream import StreamingProvider
from agent.offline import OfflineProvider
from agent.provider import LLMRequest
from agent.settings import LLMSettings
from tests.fakes.anthropic import FakeAnthropic, text_reply, tool_use_reply
from tests.fakes.anthropic_sse import Pacing

MODEL = "claude-sonnet-4-6"  # a model the fake knows (it refuses unknown ones, as the API does)
LONG = "A reply written a few words at a time, " * 8


def request(text: str = "hello") -> LLMRequest:
    return LLMRequest(
        model=MODEL, messages=[{"role": "user", "content": [{"type": "text", "text": text}]}], max_tokens=500
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    llm = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
    yield llm
    await llm.aclose()


async def test_text_arrives_in_deltas_and_the_final_response_is_the_whole_message(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.pacing = Pacing(chunk_chars=7)
    fake.script(text_reply(LONG))
    deltas: list[str] = []
    response = await provider.stream(request(), deltas.append)
    assert len(deltas) == -(-len(LONG) // 7) and "".join(deltas) == LONG
    assert response.content == [{"type": "text", "text": LONG}]
    assert response.stop_reason == "end_turn" and response.usage.output_tokens > 1
    assert fake.message_requests[-1]["stream"] is True


async def test_a_tool_call_is_rebuilt_from_its_input_json_deltas(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.pacing = Pacing(chunk_chars=5)
    fake.script(tool_use_reply("session_search", {"query": "the budget", "limit": 3}, text="Let me look."))
    deltas: list[str] = []
    response = await provider.stream(request(), deltas.append)
    assert "".join(deltas) == "Let me look."
    assert response.stop_reason == "tool_use"
    use = response.content[1]
    assert use["type"] == "tool_use" and use["input"] == {"query": "the budget", "limit": 3}


async def test_an_error_event_midway_is_the_overloaded_error(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(text_reply(LONG))
    fake.break_next_stream(after_deltas=3)
    deltas: list[str] = []
    with pytest.raises(Overloaded):
        await provider.stream(request(), deltas.append)
    assert len(deltas) == 3


async def test_a_connection_dropped_midway_is_unreachable_not_a_crash(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(text_reply(LONG))
    fake.break_next_stream(after_deltas=2, how="drop")
    with pytest.raises(ProviderUnreachable):
        await provider.stream(request(), lambda _: None)


async def test_the_offline_provider_streams_its_answer_too() -> None:
    offline = OfflineProvider()
    assert isinstance(offline, StreamingProvider)
    deltas: list[str] = []
    response = await offline.stream(request("are you there"), deltas.append)
    assert len(deltas) > 3 and "".join(deltas) == response.content[0]["text"]
