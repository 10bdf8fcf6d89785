"""Prompt-cache breakpoints: the last system block, the last message block, and two more
message blocks spaced :data:`BREAKPOINT_SPACING` blocks apart going back — four breakpoints,
the API's maximum.

The API finds a cached prefix only within about 20 blocks before a breakpoint. Spaced
breakpoints reach back about 3 x 18 blocks, so a turn still reads the previous turn's prefix
after a run of chatter (each message one block) that would put it out of reach of breakpoints
on the last three messages. Writes cost the same: only tokens past the prefix read are written.

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
# Blocks between two message breakpoints: under the API's ~20-block lookback, so the windows
# the breakpoints search overlap and together cover every boundary of the last ~56 blocks.
BREAKPOINT_SPACING = 18
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


# ContextState.extra keys: the seconds between a session's recent turns, and its calls per turn.
TURN_GAPS_KEY = "turn_gaps"
CALLS_PER_TURN_KEY = "calls_per_turn"
KEPT_GAPS = 64
MIN_GAPS = 3
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def cheapest_ttl(
    gaps: Sequence[float], calls_per_turn: float, *, read: float, write_5m: float, write_1h: float
) -> CacheTTL | None:
    """The TTL whose expected cost per turn is lowest over the observed gaps between turns, or
    None when caching costs more than it saves (every gap outlives an hour, one call a turn).

    Prices are per token of the cached prefix, relative to the input price: a turn's first call
    reads the prefix when the gap is within the TTL and writes it again otherwise; the turn's
    other calls (tool rounds) read it.
    """
    later = max(0.0, calls_per_turn - 1)
    costs: dict[CacheTTL | None, float] = {None: 1.0 + later}
    for ttl, write in (("5m", write_5m), ("1h", write_1h)):
        hit = sum(1 for g in gaps if g <= TTL_SECONDS[ttl]) / len(gaps)
        costs[ttl] = hit * read + (1 - hit) * write + later * read  # type: ignore[index]
    return min(costs, key=lambda key: (costs[key], key is not None))


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


def without_cache_control(message: dict[str, Any]) -> dict[str, Any]:
    """A wire message without ``cache_control`` markers (the message itself when it has none)."""
    content = message.get("content")
    if isinstance(content, list) and any(isinstance(b, dict) and "cache_control" in b for b in content):
        return {**message, "content": _strip_blocks(list(content))}
    return message


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
    system: list[ContentBlock],
    messages: list[dict[str, Any]],
    *,
    ttl: str,
    prefix_tokens: Sequence[int] | None = None,
    system_tokens: int | None = None,
    min_prefix: int = 0,
    unmarked: bool = False,
) -> tuple[list[ContentBlock], list[dict[str, Any]]]:
    """New system and message lists with spaced breakpoints; the inputs are never mutated.

    Any ``cache_control`` already present is removed first, so the result never carries more
    than four breakpoints and applying it twice gives the same request as applying it once.
    With ``min_prefix`` (the model's minimum cacheable prefix), a breakpoint whose prefix is
    shorter — ``system_tokens`` for the system one, ``prefix_tokens[i]`` (tokens up to and
    including message ``i``) for a message — is not placed: the API would cache nothing there.
    ``unmarked``: the messages are known to carry no marker (the pass removing them is skipped).
    """
    marker = cache_marker(ttl)
    stripped_system = _strip_blocks(list(system))
    new_system = stripped_system
    if system_tokens is None or system_tokens >= min_prefix:
        new_system = _mark_last(stripped_system, marker) or stripped_system

    new_messages = list(messages) if unmarked else [without_cache_control(m) for m in messages]

    # The breakpoints sit within the last few spacings of blocks: look at that tail first, and at
    # every block only when the search ran past it (a long run of blocks that cannot be cached).
    tail = _tail_blocks(new_messages, (MESSAGE_BREAKPOINTS + 2) * BREAKPOINT_SPACING)
    chosen = _choose(tail, prefix_tokens, min_prefix)
    if chosen is None:
        tail = _tail_blocks(new_messages, None)
        chosen = _choose(tail, prefix_tokens, min_prefix) or []
    by_message: dict[int, set[int]] = {}
    for k in chosen:
        by_message.setdefault(tail[k][0], set()).add(tail[k][1])
    for index, marks in by_message.items():
        blocks = _message_blocks(new_messages[index])
        marked = [{**b, "cache_control": dict(marker)} if j in marks else b for j, b in enumerate(blocks)]
        new_messages[index] = {**new_messages[index], "content": marked}
    return new_system, new_messages


def _tail_blocks(messages: list[dict[str, Any]], wanted: int | None) -> list[tuple[int, int, ContentBlock]]:
    """(message index, block index, block) of the last ``wanted`` blocks (all: None), in order;
    the first entry is (-1, -1, {}) when blocks before them were left out."""
    found: list[tuple[int, int, ContentBlock]] = []
    for i in range(len(messages) - 1, -1, -1):
        blocks = _message_blocks(messages[i])
        found.extend((i, j, blocks[j]) for j in range(len(blocks) - 1, -1, -1))
        if wanted is not None and len(found) >= wanted and i > 0:
            found.append((-1, -1, {}))
            break
    found.reverse()
    return found


def _choose(
    flat: list[tuple[int, int, ContentBlock]], prefix_tokens: Sequence[int] | None, min_prefix: int
) -> list[int] | None:
    """Indices into ``flat`` of the blocks to mark; None when the search would go on into the
    blocks :func:`_tail_blocks` left out (then it must run over all of them)."""
    cut = bool(flat) and flat[0][0] == -1
    floor = 1 if cut else 0
    chosen: list[int] = []
    target = len(flat) - 1
    while len(chosen) < MESSAGE_BREAKPOINTS:
        if target < floor:
            return None if cut else chosen
        upper = chosen[-1] - 1 if chosen else target
        # The cacheable block nearest the target, later ones first: spacing may shrink, never grow.
        later = (k for k in range(target, upper + 1) if _cacheable(flat[k][2]))
        earlier = (k for k in range(target - 1, floor - 1, -1) if _cacheable(flat[k][2]))
        k = next(later, None)
        if k is None:
            k = next(earlier, None)
        if k is None:
            return None if cut else chosen
        if prefix_tokens is not None and prefix_tokens[flat[k][0]] < min_prefix:
            return chosen  # earlier prefixes are shorter still
        chosen.append(k)
        target = k - BREAKPOINT_SPACING
    return chosen
