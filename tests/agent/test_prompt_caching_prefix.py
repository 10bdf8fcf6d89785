"""No breakpoint below the model's minimum cacheable prefix: the API would cache nothing there."""

from __future__ import annotations

from typing import Any

from agent.loop_request import build_request
from agent.types import AgentSession, ChatMessage


def _markers(request: Any) -> int:
    blocks = list(request.system) + [b for m in request.messages for b in m["content"]]
    return sum(1 for b in blocks if "cache_control" in b)


SESSION = AgentSession("s", "You are terse.", "claude-haiku-4-5", 200_000)


def _view(chars: int, messages: int = 3) -> list[ChatMessage]:
    text = "lorem ipsum " * (chars // 12)
    roles = (ChatMessage.user, ChatMessage.assistant)
    return [roles[i % 2](text) for i in range(messages - 1)] + [ChatMessage.user(text)]


def _marked(request: Any) -> list[int]:
    return [i for i, m in enumerate(request.messages) if any("cache_control" in b for b in m["content"])]


def test_a_prompt_under_the_minimum_prefix_carries_no_breakpoint() -> None:
    request, _ = build_request(SESSION, _view(400), [], max_tokens=100, cache_ttl="5m", min_cache_prefix=4096)
    assert _markers(request) == 0


def test_only_the_breakpoints_past_the_minimum_are_placed() -> None:
    # 41 messages of ~100 tokens: the breakpoints sit on messages 4, 22 and 40, their prefixes
    # near 500, 2,300 and 4,100 tokens; the system one near 10.
    request, _ = build_request(
        SESSION, _view(400, 41), [], max_tokens=100, cache_ttl="5m", min_cache_prefix=1_500
    )
    assert _marked(request) == [22, 40] and "cache_control" not in request.system[0]


def test_without_a_minimum_every_breakpoint_is_placed() -> None:
    request, _ = build_request(SESSION, _view(400, 41), [], max_tokens=100, cache_ttl="5m")
    assert _markers(request) == 4 and _marked(request) == [4, 22, 40]


def test_automatic_caching_puts_one_marker_at_the_top_and_none_on_blocks() -> None:
    request, _ = build_request(SESSION, _view(400), [], max_tokens=100, cache_ttl="1h", automatic_cache=True)
    assert request.cache_control == {"type": "ephemeral", "ttl": "1h"} and _markers(request) == 0
