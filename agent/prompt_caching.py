"""Prompt-cache breakpoints, "system_and_3": the last system block and the last block of each
of the last three messages carry ``cache_control`` — four breakpoints, the API's maximum.

The system prompt is never rewritten here beyond that marker, so its bytes (and the cache
prefix they start) stay identical from turn to turn.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from agent.types import ContentBlock

MESSAGE_BREAKPOINTS = 3
AUTO_LONG_GAP_SECONDS = 300.0
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})

CacheTTL = Literal["5m", "1h"]


def cache_marker(ttl: str) -> dict[str, str]:
    """The ``cache_control`` value for a TTL: "5m" is the API default, "1h" must be spelled out."""
    if ttl == "1h":
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def choose_ttl(setting: str, user_message_times: Sequence[datetime]) -> CacheTTL:
    """The TTL to use: the setting itself, or for "auto" 1h when users typically pause > 5 minutes."""
    if setting == "1h":
        return "1h"
    if setting != "auto":
        return "5m"
    times = sorted(user_message_times)
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)]
    if not gaps:
        return "5m"
    return "1h" if statistics.median(gaps) > AUTO_LONG_GAP_SECONDS else "5m"


def _cacheable(block: ContentBlock) -> bool:
    if block.get("type") in _UNCACHEABLE:
        return False
    return not (block.get("type") == "text" and not str(block.get("text", "")))


def _strip_blocks(blocks: list[ContentBlock]) -> list[ContentBlock]:
    """The same blocks without ``cache_control`` (copies only of the blocks that had one)."""
    if not any("cache_control" in b for b in blocks):
        return blocks
    return [
        {k: v for k, v in b.items() if k != "cache_control"} if "cache_control" in b else b for b in blocks
    ]


def _mark_last(blocks: list[ContentBlock], marker: dict[str, str]) -> list[ContentBlock] | None:
    """A copy of ``blocks`` with the last cacheable block marked; ``None`` when none can carry one."""
    for index in range(len(blocks) - 1, -1, -1):
        if _cacheable(blocks[index]):
            out = list(blocks)
            out[index] = {**blocks[index], "cache_control": dict(marker)}
            return out
    return None


def _message_blocks(message: dict[str, Any]) -> list[ContentBlock]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def apply_cache_control(
    system: list[ContentBlock], messages: list[dict[str, Any]], *, ttl: str
) -> tuple[list[ContentBlock], list[dict[str, Any]]]:
    """New system and message lists with system_and_3 breakpoints; the inputs are never mutated.

    Any ``cache_control`` already present is removed first, so the result never carries more
    than four breakpoints and applying it twice gives the same request as applying it once.
    """
    marker = cache_marker(ttl)
    stripped_system = _strip_blocks(list(system))
    new_system = _mark_last(stripped_system, marker) or stripped_system

    new_messages: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and "cache_control" in b for b in content):
            message = {**message, "content": _strip_blocks(list(content))}
        new_messages.append(message)

    placed = 0
    for index in range(len(new_messages) - 1, -1, -1):
        if placed == MESSAGE_BREAKPOINTS:
            break
        message = new_messages[index]
        marked = _mark_last(_message_blocks(message), marker)
        if marked is None:
            continue
        new_messages[index] = {**message, "content": marked}
        placed += 1
    return new_system, new_messages
