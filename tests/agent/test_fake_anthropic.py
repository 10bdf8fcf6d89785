"""The fake Anthropic server, driven by the real SDK: it must be as strict as the real API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.anthropic import SUMMARY_HEADINGS, FakeAnthropic, text_reply, tool_use_reply
from tests.fakes.anthropic_cache import TOOL_PREAMBLE_TOKENS, PromptCache, count_tokens

MODEL = "claude-sonnet-4-6"
CC = {"type": "ephemeral"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def client(fake: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    sdk = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0, timeout=5)
    yield sdk
    await sdk.close()


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text, **extra}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


async def create(client: anthropic.AsyncAnthropic, **params: Any) -> anthropic.types.Message:
    """messages.create with our plain-dict params (the SDK types them as TypedDicts)."""
    message: anthropic.types.Message = await client.messages.create(model=MODEL, max_tokens=64, **params)
    return message


async def rejected(client: anthropic.AsyncAnthropic, **params: Any) -> anthropic.BadRequestError:
    with pytest.raises(anthropic.BadRequestError) as info:
        await create(client, **params)
    assert info.value.type == "invalid_request_error"
    return info.value


async def test_rejects_more_than_four_cache_breakpoints(client: anthropic.AsyncAnthropic) -> None:
    system = [{"type": "text", "text": f"part {i}", "cache_control": CC} for i in range(3)]
    messages = [user("a", cache_control=CC), assistant("b"), user("c", cache_control=CC)]
    error = await rejected(client, system=system, messages=messages)
    assert "A maximum of 4 blocks with cache_control" in str(error.api_message)


async def test_rejects_orphan_tool_result(client: anthropic.AsyncAnthropic) -> None:
    orphan = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "42"}]}
    error = await rejected(client, messages=[user("hi"), assistant("hello"), orphan])
    assert "unexpected tool_use_id" in str(error.api_message)


async def test_rejects_tool_use_without_result(client: anthropic.AsyncAnthropic) -> None:
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]}
    error = await rejected(client, messages=[user("hi"), use, user("go on")])
    assert "without tool_result" in str(error.api_message)


async def test_rejects_empty_content(client: anthropic.AsyncAnthropic) -> None:
    error = await rejected(client, messages=[user("hi"), {"role": "assistant", "content": []}, user("x")])
    assert "non-empty" in str(error.api_message)


async def test_accepts_a_valid_tool_round(fake: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
    fake.script(tool_use_reply("lookup", {"q": "x"}, tool_id="toolu_abc"), text_reply("found it"))
    tools = [{"name": "lookup", "description": "look up", "input_schema": {"type": "object"}}]
    first = await create(client, tools=tools, messages=[user("find x")])
    assert first.stop_reason == "tool_use"
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_abc", "content": "x=1"}],
    }
    history = [user("find x"), {"role": "assistant", "content": [b.to_dict() for b in first.content]}, result]
    second = await create(client, tools=tools, messages=history)
    assert second.content[0].type == "text" and second.content[0].text == "found it"


async def test_second_request_with_same_prefix_reads_from_cache(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    system = [{"type": "text", "text": "You are a careful assistant. " * 20, "cache_control": CC}]
    body: dict[str, Any] = {"system": system, "messages": [user("first question " * 10, cache_control=CC)]}
    first = await create(client, **body)
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation_input_tokens and first.usage.cache_creation_input_tokens > 0
    body["messages"] = [user("first question " * 10), assistant("answer"), user("next", cache_control=CC)]
    second = await create(client, **body)
    usage = second.usage
    assert usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    total = usage.input_tokens + (usage.cache_creation_input_tokens or 0) + usage.cache_read_input_tokens
    assert total == fake.count_tokens({"model": MODEL, **body})


async def test_changed_system_prompt_misses_the_cache(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    messages = [user("question", cache_control=CC)]
    for text in ("system one", "system two"):
        reply = await create(client, system=[{"type": "text", "text": text}], messages=messages)
        assert reply.usage.cache_read_input_tokens == 0


async def test_prefix_below_minimum_is_not_cached(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake.min_cacheable_tokens = 1024
    for _ in range(2):
        reply = await create(client, messages=[user("short", cache_control=CC)])
        assert reply.usage.cache_creation_input_tokens == 0
        assert reply.usage.cache_read_input_tokens == 0


async def test_prompt_over_the_window_is_too_long(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake.context_window = 50
    messages = [user("word " * 200)]
    error = await rejected(client, messages=messages)
    tokens = fake.count_tokens({"messages": messages})
    assert error.api_message == f"prompt is too long: {tokens} tokens > 50 maximum"


async def test_input_plus_max_tokens_over_the_window_is_rejected_in_the_apis_words(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake.context_window = 1_000
    messages = [user("word " * 200)]
    tokens = fake.count_tokens({"messages": messages})
    assert tokens < 1_000
    ok = await client.messages.create(model=MODEL, max_tokens=1_000 - tokens, messages=messages)
    assert ok.content
    over = 1_000 - tokens + 1
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model=MODEL, max_tokens=over, messages=messages)
    assert info.value.type == "invalid_request_error"
    assert info.value.api_message == (
        f"input length and `max_tokens` exceed context limit: {tokens} + {over} > 1000, "
        "decrease input length or `max_tokens` and try again"
    )
    # A streamed request is refused the same way, before any event.
    with pytest.raises(anthropic.BadRequestError, match="exceed context limit"):
        async with client.messages.stream(model=MODEL, max_tokens=over, messages=messages) as events:
            async for _ in events:
                pass


async def test_max_tokens_above_the_models_output_cap_is_rejected(client: anthropic.AsyncAnthropic) -> None:
    messages = [user("hello")]
    ok = await client.messages.create(model="claude-3-5-haiku-20241022", max_tokens=8_192, messages=messages)
    assert ok.content
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="claude-3-5-haiku-20241022", max_tokens=8_193, messages=messages)
    assert info.value.api_message == (
        "max_tokens: 8193 > 8192, which is the maximum allowed number of output tokens for "
        "claude-3-5-haiku-20241022"
    )


async def test_each_model_has_its_own_window() -> None:
    fake_windows = FakeAnthropic(windows={"claude-haiku-4-5": 100})
    async with fake_windows:
        sdk = anthropic.AsyncAnthropic(base_url=fake_windows.base_url, api_key="k", max_retries=0)
        try:
            messages = [user("word " * 200)]
            assert (await sdk.messages.create(model=MODEL, max_tokens=10, messages=messages)).content
            with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
                await sdk.messages.create(model="claude-haiku-4-5", max_tokens=10, messages=messages)
        finally:
            await sdk.close()


async def test_an_unknown_model_is_not_found(client: anthropic.AsyncAnthropic) -> None:
    with pytest.raises(anthropic.NotFoundError):
        await client.messages.create(model="claude-nonexistent", max_tokens=10, messages=[user("hi")])


async def test_cjk_counts_one_token_a_character_and_tools_pay_the_preamble(fake: FakeAnthropic) -> None:
    latin = fake.count_tokens({"messages": [user("a" * 4000)]})
    assert fake.count_tokens({"messages": [user("漢" * 4000)]}) == latin + 3000
    tool = {"name": "t", "description": "d", "input_schema": {"type": "object"}}
    alone = fake.count_tokens({"messages": [user("hi")]})
    assert fake.count_tokens({"messages": [user("hi")], "tools": [tool]}) > alone + TOOL_PREAMBLE_TOKENS


async def test_records_each_request_with_headers(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    await create(client, messages=[user("hello")])
    assert fake.message_requests == [{"model": MODEL, "max_tokens": 64, "messages": [user("hello")]}]
    assert fake.requests[0].headers["authorization"] == "Bearer test-key"
    assert fake.counts["messages"] == 1


async def test_default_reply_echoes_the_last_user_text(client: anthropic.AsyncAnthropic) -> None:
    reply = await create(client, messages=[user("x" * 80)])
    assert reply.content[0].type == "text" and reply.content[0].text == "ack: " + "x" * 50


async def test_summary_request_gets_all_section_headings(client: anthropic.AsyncAnthropic) -> None:
    reply = await create(client, messages=[user("Summarize the conversation below.\n\nuser: hi")])
    assert reply.content[0].type == "text"
    assert all(heading in reply.content[0].text for heading in SUMMARY_HEADINGS)


async def test_failure_is_injected_then_cleared(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake.fail_next(529, "overloaded_error", "Overloaded")
    with pytest.raises(anthropic.OverloadedError):
        await create(client, messages=[user("hi")])
    reply = await create(client, messages=[user("hi")])
    assert reply.stop_reason == "end_turn"


async def test_count_tokens_endpoint_uses_the_fake_count(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    messages = [user("count me " * 30)]
    params: dict[str, Any] = {"model": MODEL, "messages": messages}
    counted = await client.messages.count_tokens(**params)
    assert counted.input_tokens == fake.count_tokens({"messages": messages})


blocks = st.text(alphabet="abc ", min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    conversations=st.lists(
        st.tuples(st.lists(blocks, min_size=1, max_size=6), st.sets(st.integers(0, 5), max_size=4)),
        min_size=1,
        max_size=6,
    ),
    minimum=st.sampled_from([0, 5, 40]),
)
def test_cache_split_always_adds_up_to_the_count(
    conversations: list[tuple[list[str], set[int]]], minimum: int
) -> None:
    cache = PromptCache(minimum)
    for texts, marks in conversations:
        content = [
            {"type": "text", "text": t, **({"cache_control": CC} if i in marks else {})}
            for i, t in enumerate(texts)
        ]
        body = {"model": MODEL, "messages": [{"role": "user", "content": content}]}
        usage = cache.account(body)
        assert min(usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens) >= 0
        parts = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        assert parts == count_tokens(body)
