"""The fake Messages API checks search_result blocks in tool results as the real one does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic import FakeAnthropic

MODEL = "claude-sonnet-4-6"
HIT: dict[str, Any] = {
    "type": "search_result",
    "source": "hygieia://session/s1/message/7",
    "title": "#7 user",
    "content": [{"type": "text", "text": "we picked the orange kayak"}],
    "citations": {"enabled": True},
}


@pytest.fixture
async def client() -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with FakeAnthropic() as fake:
        sdk = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0, timeout=5)
        yield sdk
        await sdk.close()


async def send(client: anthropic.AsyncAnthropic, results: list[Any], model: str = MODEL) -> None:
    await client.messages.create(
        model=model,
        max_tokens=100,
        tools=[{"name": "session_search", "description": "search", "input_schema": {"type": "object"}}],
        messages=[
            {"role": "user", "content": "which kayak?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "session_search", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": results}],
            },
        ],
    )


async def test_a_well_formed_search_result_is_accepted(client: anthropic.AsyncAnthropic) -> None:
    await send(client, [{"type": "text", "text": "1 match"}, HIT])


@pytest.mark.parametrize(
    "broken",
    [
        {k: v for k, v in HIT.items() if k != "source"},
        {k: v for k, v in HIT.items() if k != "title"},
        {**HIT, "source": ""},
        {**HIT, "content": []},
        {**HIT, "content": [{"type": "text", "text": ""}]},
        {**HIT, "content": [{"type": "image", "source": {}}]},
        {**HIT, "citations": {"enabled": "yes"}},
        {**HIT, "url": "https://example.com"},
    ],
    ids=[
        "no-source",
        "no-title",
        "empty-source",
        "no-content",
        "empty-text",
        "image",
        "bad-citations",
        "extra-key",
    ],
)
async def test_a_malformed_search_result_is_a_400(
    client: anthropic.AsyncAnthropic, broken: dict[str, Any]
) -> None:
    with pytest.raises(anthropic.BadRequestError):
        await send(client, [broken])


async def test_citations_must_be_all_or_nothing(client: anthropic.AsyncAnthropic) -> None:
    off = {**HIT, "source": "hygieia://session/s1/message/8", "citations": {"enabled": False}}
    with pytest.raises(anthropic.BadRequestError, match="citations"):
        await send(client, [HIT, off])


async def test_a_model_without_search_results_refuses_them(client: anthropic.AsyncAnthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="not supported"):
        await send(client, [HIT], model="claude-3-haiku-20240307")
