"""AnthropicProvider against the fake server: requests, retries, usage and error mapping (plain calls
through agent.llm_call, streams and counts through the SDK)."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import (
    AuthenticationFailed,
    ContextOverflow,
    InvalidRequest,
    LLMError,
    Overloaded,
    ProviderUnreachable,
    RateLimited,
    SpendLimitReached,
)
from agent.llm import AnthropicProvider, parse_prompt_too_long, parse_retry_after
from agent.llm_call import ErrorAnswer, NoAnswer
from agent.provider import LLMProvider, LLMRequest
from agent.settings import LLMSettings
from tests.fakes.anthropic import FakeAnthropic, tool_use_reply

MODEL = "claude-sonnet-4-6"
CC = {"type": "ephemeral"}
Factory = Callable[..., AnthropicProvider]


def request(text: str = "hello", **kw: Any) -> LLMRequest:
    return LLMRequest(
        model=MODEL, messages=[{"role": "user", "content": [{"type": "text", "text": text}]}], **kw
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def make_provider(fake: FakeAnthropic) -> AsyncIterator[Factory]:
    made: list[AnthropicProvider] = []

    def factory(base_url: str | None = fake.base_url, **settings: Any) -> AnthropicProvider:
        options = {"max_retries": 0, "timeout_seconds": 5.0, **settings}
        provider = AnthropicProvider(
            api_key="sk-secret-key", base_url=base_url, settings=LLMSettings(**options)
        )
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.aclose()


@pytest.fixture
def provider(make_provider: Factory) -> AnthropicProvider:
    return make_provider()


async def failing_call(provider: AnthropicProvider, kind: type[LLMError]) -> Any:
    with pytest.raises(kind) as info:
        await provider.create(request(max_tokens=64))
    # The error keeps what it came from: the API's answer, or why none came.
    assert isinstance(info.value.__cause__, ErrorAnswer | NoAnswer)
    return info.value


def test_provider_satisfies_the_protocol(provider: AnthropicProvider) -> None:
    checked: LLMProvider = provider
    assert checked.name == "anthropic"


async def test_sends_model_system_tools_and_temperature(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    system = [{"type": "text", "text": "be brief", "cache_control": CC}]
    tools = [{"name": "t", "description": "d", "input_schema": {"type": "object"}}]
    await provider.create(request(max_tokens=99, system=system, tools=tools, temperature=0.3))
    sent = fake.message_requests[0]
    assert (sent["model"], sent["max_tokens"], sent["temperature"]) == (MODEL, 99, 0.3)
    assert (sent["system"], sent["tools"]) == (system, tools)


async def test_omits_empty_system_and_tools(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    await provider.create(request(max_tokens=10))
    assert set(fake.message_requests[0]) == {"model", "max_tokens", "messages"}


async def test_usage_includes_cache_fields(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    system = [{"type": "text", "text": "stable system prompt " * 30, "cache_control": CC}]
    first = await provider.create(request("one", max_tokens=10, system=system))
    second = await provider.create(request("two", max_tokens=10, system=system))
    assert first.usage.cache_creation_input_tokens > 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.context_tokens == fake.count_tokens(fake.message_requests[1])
    assert second.usage.output_tokens == fake.usages[1]["output_tokens"]


async def test_tool_use_reply_round_trips_as_plain_dicts(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script(tool_use_reply("lookup", {"q": "x"}, text="checking"))
    tools = [{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}]
    first = await provider.create(request("find x", max_tokens=10, tools=tools))
    assert first.stop_reason == "tool_use"
    use = first.content[1]
    assert use == {"type": "tool_use", "id": use["id"], "name": "lookup", "input": {"q": "x"}}
    history = [
        {"role": "user", "content": [{"type": "text", "text": "find x"}]},
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "1"}]},
    ]
    second = await provider.create(LLMRequest(model=MODEL, messages=history, max_tokens=10, tools=tools))
    assert second.content == [{"type": "text", "text": "ack: 1"}]


async def test_prompt_too_long_is_context_overflow_with_both_numbers(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.context_window = 5
    error = await failing_call(provider, ContextOverflow)
    assert error.actual_tokens == fake.count_tokens(fake.message_requests[0])
    assert error.limit_tokens == 5


async def test_input_plus_max_tokens_over_the_limit_is_context_overflow(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    message = (
        "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, decrease input length"
    )
    fake.fail_next(400, "invalid_request_error", message)
    error = await failing_call(provider, ContextOverflow)
    assert (error.actual_tokens, error.limit_tokens) == (203_192, 200_000)


async def test_rate_limit_carries_retry_after(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.fail_next(
        429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", {"retry-after": "7"}
    )
    error = await failing_call(provider, RateLimited)
    assert error.retry_after == 7.0
    assert error.retryable


@pytest.mark.parametrize(
    ("status", "kind"), [(529, "overloaded_error"), (500, "api_error"), (503, "api_error")]
)
async def test_overloaded_and_server_errors_are_overloaded(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int, kind: str
) -> None:
    fake.fail_next(status, kind, "Overloaded")
    error = await failing_call(provider, Overloaded)
    assert error.status_code == status


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing."),
        (400, "You have reached your specified API usage limits. You will regain access on 2026-12-01."),
        (403, "Your organization has reached its spend limit."),
    ],
)
async def test_billing_errors_are_spend_limit_reached(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int, message: str
) -> None:
    fake.fail_next(status, "invalid_request_error", message)
    error = await failing_call(provider, SpendLimitReached)
    assert not error.retryable


async def test_wrong_key_is_authentication_failed(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.api_key = "another-key"
    error = await failing_call(provider, AuthenticationFailed)
    assert error.status_code == 401


async def test_permission_denied_is_authentication_failed(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(
        403, "permission_error", "Your API key does not have permission to use the specified resource."
    )
    await failing_call(provider, AuthenticationFailed)


async def test_invalid_transcript_is_invalid_request(provider: AnthropicProvider) -> None:
    orphan = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "1"}]}
    with pytest.raises(InvalidRequest, match="unexpected tool_use_id"):
        await provider.create(LLMRequest(model=MODEL, messages=[orphan], max_tokens=10))


async def test_unknown_model_is_invalid_request(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.fail_next(404, "not_found_error", "model: claude-nope")
    error = await failing_call(provider, InvalidRequest)
    assert error.status_code == 404


async def test_connection_refused_is_provider_unreachable(make_provider: Factory) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    await failing_call(make_provider(base_url=f"http://127.0.0.1:{port}"), ProviderUnreachable)


async def test_timeout_is_provider_unreachable(fake: FakeAnthropic, make_provider: Factory) -> None:
    fake.delay = 1.0
    error = await failing_call(make_provider(timeout_seconds=0.2), ProviderUnreachable)
    assert "timed out" in str(error)


async def test_retries_as_configured(fake: FakeAnthropic, make_provider: Factory) -> None:
    fake.fail_next(529, "overloaded_error", "Overloaded", {"retry-after-ms": "10"}, times=2)
    response = await make_provider(max_retries=2).create(request(max_tokens=10))
    assert response.stop_reason == "end_turn"
    assert fake.counts["messages"] == 3


async def test_each_retry_says_its_number_as_the_sdk_does(
    fake: FakeAnthropic, make_provider: Factory
) -> None:
    fake.fail_next(429, "rate_limit_error", "slow down", {"retry-after-ms": "5"}, times=2)
    await make_provider(max_retries=2).create(request(max_tokens=10))
    sent = [r.headers.get("x-stainless-retry-count") for r in fake.requests if r.path == "/v1/messages"]
    assert sent == ["0", "1", "2"]


async def test_the_servers_should_retry_false_is_obeyed(fake: FakeAnthropic, make_provider: Factory) -> None:
    fake.fail_next(529, "overloaded_error", "Overloaded", {"x-should-retry": "false"})
    await failing_call(make_provider(max_retries=3), Overloaded)
    assert fake.counts["messages"] == 1


async def test_a_lock_timeout_409_is_retried(fake: FakeAnthropic, make_provider: Factory) -> None:
    fake.fail_next(409, "conflict_error", "try again", {"retry-after-ms": "5"})
    response = await make_provider(max_retries=1).create(request(max_tokens=10))
    assert response.stop_reason == "end_turn"
    assert fake.counts["messages"] == 2


async def test_a_client_error_is_not_retried(fake: FakeAnthropic, make_provider: Factory) -> None:
    fake.fail_next(400, "invalid_request_error", "messages: field required")
    error = await failing_call(make_provider(max_retries=3), InvalidRequest)
    assert str(error) == "Anthropic API 400 invalid_request_error: messages: field required"
    assert fake.counts["messages"] == 1


async def test_an_error_answer_that_is_not_json_is_quoted(make_provider: Factory) -> None:
    async with answering(b"<html>Bad Gateway</html>", status=502) as url:
        error = await failing_call(make_provider(base_url=url), Overloaded)
    assert str(error) == "Anthropic API 502: Error code: 502 - <html>Bad Gateway</html>"


async def test_base_url_falls_back_to_the_environment(
    fake: FakeAnthropic, make_provider: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    await make_provider(base_url=None).create(request(max_tokens=10))
    assert fake.counts["messages"] == 1


async def test_count_tokens_returns_the_servers_count(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    req = request("count these words " * 20, max_tokens=10)
    assert await provider.count_tokens(req) == fake.count_tokens({"messages": req.messages})
    assert fake.requests[0].json is not None and "max_tokens" not in fake.requests[0].json


async def test_count_tokens_is_none_without_the_endpoint(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.count_tokens_enabled = False
    assert await provider.count_tokens(request(max_tokens=10)) is None


async def test_count_tokens_errors_are_mapped(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.fail_next(529, "overloaded_error", "Overloaded", endpoint="count_tokens")
    with pytest.raises(Overloaded):
        await provider.count_tokens(request(max_tokens=10))


async def test_api_key_never_reaches_the_log(
    fake: FakeAnthropic, provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await provider.create(request(max_tokens=10))
    fake.fail_next(401, "authentication_error", "invalid x-api-key")
    with pytest.raises(AuthenticationFailed):
        await provider.create(request(max_tokens=10))
    assert caplog.records
    assert "sk-secret-key" not in caplog.text


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("prompt is too long: 208310 tokens > 200000 maximum", (208310, 200000)),
        ("Prompt is too long: 1,024,000 tokens > 1,000,000 maximum", (1024000, 1000000)),
        ("prompt is too long", (None, None)),
    ],
)
def test_parse_prompt_too_long(message: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_prompt_too_long(message) == expected


@given(actual=st.integers(1, 10**8), limit=st.integers(1, 10**8))
def test_parse_prompt_too_long_reads_any_numbers(actual: int, limit: int) -> None:
    message = (
        f"Anthropic API 400 invalid_request_error: prompt is too long: {actual} tokens > {limit} maximum"
    )
    assert parse_prompt_too_long(message) == (actual, limit)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"retry-after": "3"}, 3.0), ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5), ({}, None)],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


@contextlib.asynccontextmanager
async def answering(body: bytes, status: int = 200) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that answers every Messages call with ``body``; its URL."""

    async def answer(_request: web.Request) -> web.Response:
        return web.Response(status=status, body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/messages", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"<html>gateway says hi</html>", "not JSON"),
        (b'{"type": "message", "usage": {"input_tokens": 1}}', "no content"),
        (b'{"type": "message", "content": []}', "no usage"),
    ],
)
async def test_a_200_that_is_not_a_message_is_an_llm_error(
    make_provider: Factory, body: bytes, said: str
) -> None:
    async with answering(body) as url:
        with pytest.raises(LLMError, match=said):
            await make_provider(base_url=url).create(request(max_tokens=10))


MESSAGE_BODY = (
    b'{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",'
    b' "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",'
    b' "usage": {"input_tokens": 3, "output_tokens": 1}}'
)


async def test_a_proxy_named_in_the_environment_carries_the_call(
    make_provider: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    async def forward(request: web.Request) -> web.Response:
        seen.append(str(request.url))  # a proxy gets the absolute URL of the request it carries
        return web.Response(body=MESSAGE_BODY, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{runner.addresses[0][1]}")
        # A host that resolves nowhere: only the proxy can answer.
        provider = make_provider(base_url="http://api.anthropic.invalid")
        response = await provider.create(request(max_tokens=10))
    finally:
        await runner.cleanup()
    assert response.stop_reason == "end_turn"
    assert seen == ["http://api.anthropic.invalid/v1/messages"]


async def test_null_fields_of_a_reply_block_are_not_stored(make_provider: Factory) -> None:
    body = (
        b'{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",'
        b' "content": [{"type": "text", "text": "hi", "citations": null}], "stop_reason": "end_turn",'
        b' "stop_sequence": null, "usage": {"input_tokens": 3, "output_tokens": 1, "cache_creation": null}}'
    )
    async with answering(body) as url:
        response = await make_provider(base_url=url).create(request(max_tokens=10))
    assert response.content == [{"type": "text", "text": "hi"}]
    assert response.usage.input_tokens == 3 and response.usage.cache_creation_1h_input_tokens is None
