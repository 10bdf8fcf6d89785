"""Breakpoints spaced so a turn finds the previous turn's prefix within the API's 20-block lookback.

A busy group puts a run of chatter (one block a message) between two turns; with breakpoints on
the last three messages only, the previous turn's prefix falls out of the lookback of every
breakpoint and the whole conversation is written again.
"""

from __future__ import annotations

from agent.llm import AnthropicProvider
from agent.loop_request import build_request
from agent.prompt_caching import BREAKPOINT_SPACING
from agent.settings import LLMSettings
from agent.types import AgentSession, ChatMessage
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.anthropic_cache import PromptCache

SESSION = AgentSession(
    "group", "You are a helpful member of a busy group chat. " * 40, "claude-sonnet-5-5", 1_000_000
)


def _chatter(count: int, start: int) -> list[ChatMessage]:
    return [ChatMessage.user(f"[ann] chatter line {start + i} about the parking rules") for i in range(count)]


async def _read_after(chatter: int) -> tuple[int, int]:
    """(tokens the first turn's prompt cached, tokens the next turn read) with ``chatter`` lines between."""
    first = [*_chatter(10, 0), ChatMessage.user("@bot what did we decide?")]
    async with FakeAnthropic() as fake:
        assert fake.cache.lookback == 20  # like the API
        provider = AnthropicProvider(api_key="k", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
        try:
            request, _ = build_request(SESSION, first, [], max_tokens=200, cache_ttl="1h")
            reply = await provider.create(request)
            written = reply.usage.cache_creation_input_tokens
            second = [
                *first,
                ChatMessage(role="assistant", content=reply.content),
                *_chatter(chatter, 10),
                ChatMessage.user("@bot and the cake?"),
            ]
            request, _ = build_request(SESSION, second, [], max_tokens=200, cache_ttl="1h")
            again = await provider.create(request)
        finally:
            await provider.aclose()
    return written, again.usage.cache_read_input_tokens


async def test_a_turn_after_thirty_lines_of_chatter_reads_the_previous_turns_prefix() -> None:
    written, read = await _read_after(30)
    assert written > 0 and read >= written


async def test_a_turn_after_a_few_lines_reads_it_too() -> None:
    written, read = await _read_after(3)
    assert read >= written


def test_the_fake_finds_a_prefix_only_within_the_lookback() -> None:
    cache = PromptCache()
    blocks = [{"type": "text", "text": f"line {i} " * 20} for i in range(40)]

    def body(upto: int) -> dict[str, object]:
        marked = [*blocks[: upto - 1], {**blocks[upto - 1], "cache_control": {"type": "ephemeral"}}]
        return {"model": "m", "messages": [{"role": "user", "content": marked}]}

    cache.account(body(10))
    assert cache.account(body(10 + 20)).cache_read_input_tokens > 0  # 20 blocks back: found
    cache.clear()
    cache.account(body(10))
    assert cache.account(body(10 + 21)).cache_read_input_tokens == 0  # 21 back: out of reach


def test_the_spacing_keeps_the_lookback_windows_overlapping() -> None:
    assert PromptCache().lookback > BREAKPOINT_SPACING  # type: ignore[operator]
