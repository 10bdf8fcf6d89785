"""The fake Messages API checks deferred tools, the tool search tool and tool references as the
real one does, runs the search when scripted to, and counts deferred definitions as the API does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.anthropic_tool_search import definition_tokens, search, tool_search_reply

MODEL = "claude-sonnet-4-6"
BM25 = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
REGEX = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}


def tool(name: str, description: str = "a tool", *, deferred: bool = False) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "description": description, "input_schema": SCHEMA}
    return {**found, "defer_loading": True} if deferred else found


WEATHER = tool("get_weather", "The weather forecast for a city.", deferred=True)
MAIL = tool("send_mail", "Send an email to someone.", deferred=True)
MEMORY = tool("memory", "Notes kept across sessions.")


def search_turn(refs: list[Any], use_id: str = "srvtoolu_1") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "weather in Oslo?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "tool_search_tool_bm25",
                    "input": {"query": "weather"},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": use_id,
                    "content": {"type": "tool_search_tool_search_result", "tool_references": refs},
                },
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"}]},
    ]


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def send(
    fake: FakeAnthropic, tools: list[dict[str, Any]], messages: list[dict[str, Any]] | None = None
) -> None:
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0, timeout=5)
    try:
        await client.messages.create(
            model=MODEL, max_tokens=100, tools=tools, messages=messages or [{"role": "user", "content": "hi"}]
        )
    finally:
        await client.close()


async def refused(
    fake: FakeAnthropic, tools: list[dict[str, Any]], messages: list[dict[str, Any]] | None = None
) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await send(fake, tools, messages)
    return str(caught.value)


async def test_deferred_tools_beside_the_search_tool_are_accepted(fake: FakeAnthropic) -> None:
    await send(
        fake,
        [MEMORY, WEATHER, MAIL, BM25],
        search_turn([{"type": "tool_reference", "tool_name": "get_weather"}]),
    )


async def test_a_deferred_tool_without_a_search_tool_is_refused(fake: FakeAnthropic) -> None:
    assert "requires a tool search tool" in await refused(fake, [MEMORY, WEATHER])


async def test_a_request_where_every_tool_is_deferred_is_refused(fake: FakeAnthropic) -> None:
    assert "All tools have defer_loading set" in await refused(
        fake, [WEATHER, {**BM25, "defer_loading": True}]
    )


async def test_a_deferred_search_tool_is_refused(fake: FakeAnthropic) -> None:
    message = await refused(fake, [MEMORY, WEATHER, {**BM25, "defer_loading": True}])
    assert "the tool search tool itself cannot have defer_loading" in message


async def test_a_search_tool_with_the_other_variants_name_is_refused(fake: FakeAnthropic) -> None:
    assert "must be 'tool_search_tool_bm25'" in await refused(
        fake, [MEMORY, WEATHER, {**BM25, "name": "tool_search_tool_regex"}]
    )


async def test_a_call_of_a_deferred_tool_no_reference_loaded_is_refused(fake: FakeAnthropic) -> None:
    message = await refused(
        fake, [MEMORY, WEATHER, BM25], search_turn([{"type": "tool_reference", "tool_name": "send_mail"}])
    )
    assert "a deferred tool of this request" in message or "no tool_reference" in message


async def test_a_reference_to_a_tool_that_is_not_deferred_is_refused(fake: FakeAnthropic) -> None:
    refs = [
        {"type": "tool_reference", "tool_name": "get_weather"},
        {"type": "tool_reference", "tool_name": "nowhere"},
    ]
    assert "'nowhere', which is not a deferred tool" in await refused(
        fake, [MEMORY, WEATHER, BM25], search_turn(refs)
    )


@pytest.mark.parametrize(
    "ref",
    [
        {"type": "tool_reference"},
        {"type": "tool_reference", "tool_name": ""},
        {"type": "tool_ref", "tool_name": "get_weather"},
        {"type": "tool_reference", "tool_name": "get_weather", "input_schema": {}},
        "get_weather",
    ],
)
async def test_a_malformed_tool_reference_is_refused(fake: FakeAnthropic, ref: Any) -> None:
    await refused(fake, [MEMORY, WEATHER, BM25], search_turn([ref]))


async def test_a_search_result_that_follows_no_server_tool_use_is_refused(fake: FakeAnthropic) -> None:
    refs = [{"type": "tool_reference", "tool_name": "get_weather"}]
    assert "must follow its server_tool_use" in await refused(
        fake, [MEMORY, WEATHER, BM25], search_turn(refs, use_id="srvtoolu_9")
    )


async def test_a_search_result_with_the_wrong_content_type_is_refused(fake: FakeAnthropic) -> None:
    messages = search_turn([{"type": "tool_reference", "tool_name": "get_weather"}])
    messages[1]["content"][1]["content"]["type"] = "tool_search_tool_result"
    assert "must be a tool_search_tool_search_result" in await refused(
        fake, [MEMORY, WEATHER, BM25], messages
    )


def test_bm25_search_finds_the_tool_whose_words_match() -> None:
    body = {"tools": [MEMORY, WEATHER, MAIL, BM25]}
    assert search(body, "weather forecast") == ["get_weather"]
    assert search(body, "email") == ["send_mail"]


def test_regex_search_matches_names_and_descriptions() -> None:
    body = {"tools": [MEMORY, WEATHER, MAIL, REGEX]}
    assert search(body, r"get_.*") == ["get_weather"]
    assert search(body, r"(?i)EMAIL") == ["send_mail"]
    assert search(body, r"memory") == []  # only deferred tools are searched


async def test_a_scripted_search_answers_server_tool_use_and_its_references(fake: FakeAnthropic) -> None:
    fake.responder = lambda body: tool_search_reply(body, "weather", call={"city": "Oslo"})
    client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0, timeout=5)
    try:
        answer = await client.messages.create(
            model=MODEL,
            max_tokens=100,
            tools=[MEMORY, WEATHER, MAIL, BM25],
            messages=[{"role": "user", "content": "x"}],
        )
    finally:
        await client.close()
    kinds = [b.type for b in answer.content]
    assert kinds[:3] == ["server_tool_use", "tool_search_tool_result", "tool_use"]
    result = answer.content[1]
    assert result.type == "tool_search_tool_result"
    assert result.content.type == "tool_search_tool_search_result"
    assert [r.tool_name for r in result.content.tool_references] == ["get_weather"]
    assert answer.stop_reason == "tool_use"


def test_deferred_definitions_are_not_counted_until_loaded() -> None:
    long = tool("get_weather", "The weather forecast for a city. " * 1000)
    loaded = definition_tokens({"tools": [MEMORY, long], "messages": []})
    deferred = definition_tokens({"tools": [MEMORY, {**long, "defer_loading": True}, BM25], "messages": []})
    assert deferred < loaded / 10
