"""AnthropicProvider against hostile servers (tests/fakes/anthropic_hostile.py): whatever the answer,
plain or streamed, the call ends in bounded time and memory with one of our LLMError types."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.errors import LLMError, Overloaded, ProviderUnreachable, RateLimited
from agent.llm import AnthropicProvider
from agent.llm_answer import MalformedAnswer
from agent.provider import LLMRequest
from agent.settings import LLMSettings
from tests.fakes.anthropic_hostile import WRONG_EVENTS, WRONG_TYPES, HostileAnthropic, gzip_bomb
from tests.memory_probe import peak_rss

MODEL = "claude-sonnet-4-6"
# Far above what a bounded call costs, far below what today's unbounded one took (+1,145 MB).
MAX_RISE = 200 * 1024 * 1024
# A test that would wait for the server's hour fails here instead of hanging the suite.
GIVE_UP = 60.0
# A stream bomb costs ~4 s of CPU (16 MB of events through the SDK's parser) on a quiet machine.
BOMB_SECONDS = 30.0
WAYS = ("plain", "stream")


def request() -> LLMRequest:
    return LLMRequest(
        model=MODEL, messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}], max_tokens=64
    )


async def call(fake: HostileAnthropic, way: str, **settings: Any) -> tuple[BaseException, float, int]:
    """The error the call ended with, its wall seconds and the process's RSS rise meanwhile."""
    options: dict[str, Any] = {"max_retries": 2, "timeout_seconds": 5.0, **settings}
    provider = AnthropicProvider(api_key="sk-test", base_url=fake.base_url, settings=LLMSettings(**options))
    shown: list[str] = []
    started = time.monotonic()
    try:
        with peak_rss() as peak:
            async with asyncio.timeout(GIVE_UP):
                if way == "plain":
                    await provider.create(request())
                else:
                    await provider.stream(request(), shown.append)
    except Exception as exc:  # what escapes is the point of the test
        return exc, time.monotonic() - started, peak.rise
    finally:
        await provider.aclose()
    raise AssertionError("the hostile answer was taken for a reply")


@pytest.fixture
async def hostile(request: pytest.FixtureRequest) -> AsyncIterator[HostileAnthropic]:
    shape, variant = request.param
    async with HostileAnthropic(shape, variant=variant) as fake:
        yield fake


def shapes(*names: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("hostile", [(n, None) for n in names], indirect=True, ids=names)


@pytest.mark.parametrize("way", WAYS)
@shapes("retry_after_3600", "retry_after_date_2100")
async def test_a_rate_limit_asking_for_hours_fails_at_once_as_rate_limited(
    hostile: HostileAnthropic, way: str
) -> None:
    error, seconds, _ = await call(hostile, way)
    assert type(error) is RateLimited, repr(error)
    assert "the server asked for" in str(error) and "llm.max_retry_wait_seconds" in str(error)
    assert seconds < 3 and hostile.requests == 1


@pytest.mark.parametrize("way", WAYS)
@shapes("overloaded_3600", "retry_after_ms")
async def test_overloaded_asking_for_an_hour_fails_at_once_as_overloaded(
    hostile: HostileAnthropic, way: str
) -> None:
    error, seconds, _ = await call(hostile, way)
    assert type(error) is Overloaded, repr(error)
    assert "the server asked for 3,600 seconds" in str(error)
    assert seconds < 3 and hostile.requests == 1


@pytest.mark.parametrize("way", WAYS)
@shapes("overloaded_3600")
async def test_a_wait_within_the_cap_is_still_refused_when_it_would_pass_the_deadline(
    hostile: HostileAnthropic, way: str
) -> None:
    error, seconds, _ = await call(hostile, way, max_retry_wait_seconds=3600, deadline_seconds=30)
    assert type(error) is Overloaded and "llm.deadline_seconds" in str(error)
    assert seconds < 3 and hostile.requests == 1


@pytest.mark.parametrize("way", WAYS)
@shapes("trickle", "endless")
async def test_an_answer_that_trickles_or_never_ends_stops_at_the_deadline(
    hostile: HostileAnthropic, way: str
) -> None:
    error, seconds, _ = await call(hostile, way, timeout_seconds=2.0, deadline_seconds=3.0)
    assert type(error) is ProviderUnreachable and "llm.deadline_seconds" in str(error)
    assert 2.9 < seconds < 5


@pytest.mark.parametrize("way", WAYS)
@shapes("gzip_bomb")
async def test_a_gzip_bomb_is_refused_past_the_size_cap_in_bounded_memory(
    hostile: HostileAnthropic, way: str
) -> None:
    gzip_bomb(way == "stream")  # made before measuring: the server's share is not the client's
    error, seconds, rise = await call(hostile, way)
    assert type(error) is MalformedAnswer and "larger than 16,000,000 bytes" in str(error)
    assert rise < MAX_RISE, f"RSS rose {rise / 2**20:.0f} MB"
    assert seconds < BOMB_SECONDS, f"{seconds:.1f} s"


@pytest.mark.parametrize("way", WAYS)
@shapes("deep_json")
async def test_deeply_nested_json_is_a_malformed_answer(hostile: HostileAnthropic, way: str) -> None:
    error, seconds, _ = await call(hostile, way)
    assert type(error) is MalformedAnswer, repr(error)
    assert seconds < 5


@pytest.mark.parametrize(
    "hostile", [("wrong_types", v) for v in WRONG_TYPES], indirect=True, ids=list(WRONG_TYPES)
)
async def test_a_message_of_wrong_types_is_a_malformed_answer(hostile: HostileAnthropic) -> None:
    error, _, _ = await call(hostile, "plain")
    assert type(error) is MalformedAnswer, repr(error)
    assert str(error).startswith("Anthropic API: malformed answer: ")


@pytest.mark.parametrize(
    "hostile", [("wrong_types", v) for v in WRONG_EVENTS], indirect=True, ids=list(WRONG_EVENTS)
)
async def test_a_stream_of_malformed_events_is_a_malformed_answer(hostile: HostileAnthropic) -> None:
    error, _, _ = await call(hostile, "stream")
    assert type(error) is MalformedAnswer, repr(error)
    assert isinstance(error, LLMError) and hostile.requests == 1


@pytest.mark.parametrize(
    ("hostile", "kind"),
    [
        (("trickle", None), ProviderUnreachable),
        (("endless", None), ProviderUnreachable),
        (("gzip_bomb", None), MalformedAnswer),
        (("deep_json", None), MalformedAnswer),
        (("wrong_types", None), MalformedAnswer),
    ],
    indirect=["hostile"],
    ids=["trickle", "endless", "gzip_bomb", "deep_json", "wrong_types"],
)
async def test_counting_tokens_is_bounded_the_same_way(
    hostile: HostileAnthropic, kind: type[LLMError]
) -> None:
    gzip_bomb(False)
    settings = LLMSettings(max_retries=0, timeout_seconds=2.0, deadline_seconds=3.0)
    provider = AnthropicProvider(api_key="sk-test", base_url=hostile.base_url, settings=settings)
    started = time.monotonic()
    try:
        with peak_rss() as peak, pytest.raises(kind):
            async with asyncio.timeout(GIVE_UP):
                await provider.count_tokens(request())
    finally:
        await provider.aclose()
    assert time.monotonic() - started < 5 and peak.rise < MAX_RISE
