"""AnthropicProvider and the fake API on today's models: 5.x request rules, signed thinking,
automatic caching, and the cache figures of a streamed call."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from agent.errors import InvalidRequest
from agent.llm import AnthropicProvider
from agent.provider import LLMRequest
from agent.settings import LLMSettings
from tests.fakes.anthropic import FakeAnthropic, Reply

MODEL = "claude-sonnet-5-5"
BIG = "lorem ipsum dolor sit amet " * 400  # ~2,700 tokens: over every minimum prefix
THOUGHT = Reply(
    [{"type": "thinking", "thinking": "The user greets me; answer in kind."}, {"type": "text", "text": "hi"}]
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    made = AnthropicProvider(api_key="k", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
    yield made
    await made.aclose()


@pytest.fixture
async def client(fake: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    made = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0)
    yield made
    await made.close()


@pytest.mark.parametrize(
    "extra",
    [
        {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        {"temperature": 0.2},
        {"top_p": 0.9},
        {"top_k": 5},
    ],
)
async def test_the_fake_refuses_what_a_5x_model_refuses(
    client: anthropic.AsyncAnthropic, extra: dict[str, Any]
) -> None:
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(model=MODEL, max_tokens=64, messages=[user("hi")], extra_body=extra)  # type: ignore[arg-type]


async def test_a_4x_model_still_takes_a_temperature(client: anthropic.AsyncAnthropic) -> None:
    await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=[user("hi")], extra_body={"temperature": 0.2}
    )  # type: ignore[arg-type]


async def test_a_temperature_never_reaches_a_5x_model(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    response = await provider.create(
        LLMRequest(model=MODEL, messages=[user("hi")], max_tokens=64, temperature=0.3)
    )
    assert response.stop_reason == "end_turn"
    assert "temperature" not in fake.message_requests[-1]


async def test_thinking_comes_back_signed_and_replays_unchanged(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(THOUGHT)
    first = await provider.create(LLMRequest(model=MODEL, messages=[user("hello")], max_tokens=64))
    thinking = first.content[0]
    assert thinking["type"] == "thinking" and thinking["signature"]
    history = [user("hello"), {"role": "assistant", "content": first.content}, user("and?")]
    await provider.create(LLMRequest(model=MODEL, messages=history, max_tokens=64))  # accepted as is


@pytest.mark.parametrize("change", ["modified", "missing", "other_model"])
async def test_the_fake_refuses_a_tampered_or_replayed_thinking_block(
    fake: FakeAnthropic, provider: AnthropicProvider, change: str
) -> None:
    fake.script(THOUGHT)
    first = await provider.create(LLMRequest(model=MODEL, messages=[user("hello")], max_tokens=64))
    content = copy.deepcopy(first.content)
    model = MODEL
    if change == "modified":
        content[0]["thinking"] += " (edited)"
    elif change == "missing":
        del content[0]["signature"]
    else:
        model = "claude-opus-5-5"
    history = [user("hello"), {"role": "assistant", "content": content}, user("and?")]
    with pytest.raises(InvalidRequest):
        await provider.create(LLMRequest(model=model, messages=history, max_tokens=64))


async def test_a_redacted_thinking_block_replays_only_to_its_model(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(Reply([{"type": "redacted_thinking", "data": "sealed"}, {"type": "text", "text": "ok"}]))
    first = await provider.create(LLMRequest(model=MODEL, messages=[user("hello")], max_tokens=64))
    history = [user("hello"), {"role": "assistant", "content": first.content}, user("and?")]
    await provider.create(LLMRequest(model=MODEL, messages=history, max_tokens=64))
    with pytest.raises(InvalidRequest):
        await provider.create(LLMRequest(model="claude-haiku-5-5", messages=history, max_tokens=64))


async def test_streamed_thinking_arrives_with_its_signature(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(THOUGHT, THOUGHT)
    plain = await provider.create(LLMRequest(model=MODEL, messages=[user("hello")], max_tokens=64))
    texts: list[str] = []
    streamed = await provider.stream(
        LLMRequest(model=MODEL, messages=[user("hello")], max_tokens=64), texts.append
    )
    assert streamed.content == plain.content
    assert "".join(texts) == "hi"


def _cached_request(ttl: str | None = None) -> LLMRequest:
    marker = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    system = [{"type": "text", "text": BIG, "cache_control": marker}]
    return LLMRequest(model=MODEL, messages=[user("question")], max_tokens=64, system=system)


async def test_the_cache_figures_of_a_streamed_call_are_its_final_usage(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    written = await provider.stream(_cached_request("1h"), lambda _: None)
    final = fake.usages[-1]
    assert written.usage.cache_creation_input_tokens == final["cache_creation_input_tokens"] > 0
    assert (
        written.usage.cache_creation_1h_input_tokens == final["cache_creation"]["ephemeral_1h_input_tokens"]
    )
    assert written.usage.cache_creation_1h_input_tokens == written.usage.cache_creation_input_tokens
    read = await provider.stream(_cached_request("1h"), lambda _: None)
    assert read.usage.cache_read_input_tokens == fake.usages[-1]["cache_read_input_tokens"] > 0


async def test_automatic_caching_is_one_top_level_marker_that_the_api_honours(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    request = LLMRequest(
        model=MODEL,
        messages=[user(BIG)],
        max_tokens=64,
        cache_control={"type": "ephemeral"},
    )
    first = await provider.create(request)
    second = await provider.create(request)
    body = fake.message_requests[-1]
    assert body["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["messages"][0]["content"][0]
    assert first.usage.cache_creation_input_tokens > 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
