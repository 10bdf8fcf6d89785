"""The fake Messages API refuses what API version 2026-10-21 and the Fable models refuse."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic import FakeAnthropic

TOOL = {"name": "session_search", "description": "search", "input_schema": {"type": "object"}}
CITATION = {
    "type": "search_result_location",
    "source": "hygieia://session/s1/message/7",
    "title": "#7 user",
    "cited_text": "the orange kayak",
    "search_result_index": 0,
    "start_block_index": 0,
    "end_block_index": 1,
}
PDF = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}


@pytest.fixture
async def client() -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with FakeAnthropic() as fake:
        sdk = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0, timeout=5)
        yield sdk
        await sdk.close()


async def send(client: anthropic.AsyncAnthropic, model: str, messages: list[Any], **extra: Any) -> None:
    await client.messages.create(
        model=model, max_tokens=100, tools=[TOOL], messages=messages, extra_body=extra or None
    )


HELLO: list[Any] = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "session_search"}])
async def test_fable_5_1_refuses_a_forced_tool_choice(
    client: anthropic.AsyncAnthropic, choice: dict[str, Any]
) -> None:
    with pytest.raises(anthropic.BadRequestError, match="tool_choice"):
        await send(client, "claude-fable-5-1", HELLO, tool_choice=choice)


@pytest.mark.parametrize(("model", "choice"), [("claude-fable-5-1", "auto"), ("claude-fable-5-2", "any")])
async def test_a_tool_choice_the_model_takes_is_accepted(
    client: anthropic.AsyncAnthropic, model: str, choice: str
) -> None:
    await send(client, model, HELLO, tool_choice={"type": choice})


@pytest.mark.parametrize("thinking", [{"type": "disabled"}, {"type": "enabled", "budget_tokens": 2048}])
@pytest.mark.parametrize("model", ["claude-fable-5-2", "claude-fable-5-1", "claude-fable-5"])
async def test_a_fable_model_refuses_thinking_other_than_adaptive(
    client: anthropic.AsyncAnthropic, model: str, thinking: dict[str, Any]
) -> None:
    with pytest.raises(anthropic.BadRequestError, match="thinking"):
        await send(client, model, HELLO, thinking=thinking)


@pytest.mark.parametrize("sampling", [{"temperature": 0.2}, {"top_p": 0.9}, {"top_k": 5}])
async def test_a_fable_model_refuses_sampling_parameters(
    client: anthropic.AsyncAnthropic, sampling: dict[str, Any]
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=r"not supported|only the default"):
        await send(client, "claude-fable-5-2", HELLO, **sampling)


async def test_a_document_block_in_an_assistant_message_is_refused(client: anthropic.AsyncAnthropic) -> None:
    messages = [*HELLO, {"role": "assistant", "content": [PDF]}, {"role": "user", "content": "and?"}]
    with pytest.raises(anthropic.BadRequestError, match="document"):
        await send(client, "claude-sonnet-4-6", messages)


async def test_user_text_carrying_citations_is_refused(client: anthropic.AsyncAnthropic) -> None:
    cited = {"type": "text", "text": "you said kayak", "citations": [CITATION]}
    with pytest.raises(anthropic.BadRequestError, match="citations are not allowed in user"):
        await send(client, "claude-sonnet-4-6", [{"role": "user", "content": [cited]}])


def _search_result_turn(inner: dict[str, Any]) -> list[Any]:
    hit = {
        "type": "search_result",
        "source": "hygieia://session/s1/message/7",
        "title": "#7 user",
        "content": [inner],
        "citations": {"enabled": True},
    }
    return [
        *HELLO,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "session_search", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [hit]}]},
    ]


async def test_text_with_citations_inside_a_search_result_is_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    inner = {"type": "text", "text": "the orange kayak", "citations": [CITATION]}
    with pytest.raises(anthropic.BadRequestError, match="citations are not allowed in user"):
        await send(client, "claude-sonnet-4-6", _search_result_turn(inner))


async def test_a_search_result_with_citations_enabled_and_plain_text_is_accepted(
    client: anthropic.AsyncAnthropic,
) -> None:
    await send(client, "claude-sonnet-4-6", _search_result_turn({"type": "text", "text": "the orange kayak"}))


async def test_an_assistant_text_with_citations_is_accepted(client: anthropic.AsyncAnthropic) -> None:
    cited = {"type": "text", "text": "you said kayak", "citations": [CITATION]}
    messages = [*HELLO, {"role": "assistant", "content": [cited]}, {"role": "user", "content": "ok"}]
    await send(client, "claude-sonnet-4-6", messages)
