"""The fake server's cache diagnostics, as strict as the API's, and our provider reading them from
a plain answer and from a stream's ``message_start``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from agent.llm import AnthropicProvider
from agent.provider import LLMRequest
from agent.settings import LLMSettings
from tests.fakes.anthropic import FakeAnthropic

MODEL = "claude-sonnet-4-6"
HEADERS = {"x-api-key": "test", "anthropic-version": "2023-06-01"}


def body(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": text}], **extra}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def client(fake: FakeAnthropic) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=fake.base_url, headers=HEADERS) as http:
        yield http


@pytest.mark.parametrize(
    ("diagnostics", "field"),
    [
        ("msg_1", "diagnostics"),
        ({}, "diagnostics.previous_message_id"),
        ({"previous_message_id": None, "verbose": True}, "diagnostics.verbose"),
        ({"previous_message_id": 7}, "diagnostics.previous_message_id"),
        ({"previous_message_id": ""}, "diagnostics.previous_message_id"),
    ],
)
async def test_malformed_diagnostics_are_refused_naming_the_field(
    client: httpx.AsyncClient, diagnostics: Any, field: str
) -> None:
    answer = await client.post("/v1/messages", json=body(diagnostics=diagnostics))
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith(f"{field}:")


async def test_without_diagnostics_nothing_is_kept_and_none_is_answered(
    fake: FakeAnthropic, client: httpx.AsyncClient
) -> None:
    answer = (await client.post("/v1/messages", json=body())).json()
    assert "diagnostics" not in answer and fake.diagnostics.kept == {}


async def test_a_first_call_opts_in_with_null_and_the_next_compares_without_a_beta_header(
    fake: FakeAnthropic, client: httpx.AsyncClient
) -> None:
    first = (await client.post("/v1/messages", json=body(diagnostics={"previous_message_id": None}))).json()
    grown = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": "more"},
    ]
    again = {**body(diagnostics={"previous_message_id": first["id"]}), "messages": grown}
    second = (await client.post("/v1/messages", json=again)).json()
    edited = {**again, "messages": [{"role": "user", "content": "hello"}, *grown[1:]]}
    third = (await client.post("/v1/messages", json=edited)).json()

    assert first["diagnostics"] is None and second["diagnostics"] is None
    assert third["diagnostics"]["cache_miss_reason"]["type"] == "messages_changed"
    assert third["diagnostics"]["cache_miss_reason"]["cache_missed_input_tokens"] > 0


async def test_a_request_that_only_changes_thinking_cannot_be_diagnosed(
    fake: FakeAnthropic, client: httpx.AsyncClient
) -> None:
    first = (await client.post("/v1/messages", json=body(diagnostics={"previous_message_id": None}))).json()
    thinking = {"type": "adaptive"}
    later = body(diagnostics={"previous_message_id": first["id"]}, thinking=thinking)
    second = (await client.post("/v1/messages", json=later)).json()
    assert second["diagnostics"] == {"cache_miss_reason": {"type": "unavailable"}}


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    llm = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
    yield llm
    await llm.aclose()


def request(previous: str | None) -> LLMRequest:
    return LLMRequest(
        model=MODEL,
        messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        max_tokens=200,
        diagnostics={"previous_message_id": previous},
    )


async def test_the_provider_reads_the_reason_from_a_plain_answer(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    first = await provider.create(request(None))
    second = await provider.create(replace(request(first.id), model="claude-opus-4-8"))
    assert first.id is not None and first.cache_miss is None
    assert second.cache_miss is not None and second.cache_miss[0] == "model_changed"
    assert fake.message_requests[0]["diagnostics"] == {"previous_message_id": None}


async def test_the_provider_reads_the_reason_from_a_stream(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    first = await provider.stream(request(None), lambda _text: None)
    fake.diagnostics.forget()
    second = await provider.stream(request(first.id), lambda _text: None)
    assert first.id is not None and first.cache_miss is None
    assert second.cache_miss == ("previous_message_not_found", None)
    assert fake.message_requests[1]["diagnostics"] == {"previous_message_id": first.id}
