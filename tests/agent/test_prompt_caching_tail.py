"""Breakpoints are searched for in the transcript's tail first: the same places as a search over
every block, whatever the transcript (long runs of blocks that cannot carry a marker included)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.prompt_caching import BREAKPOINT_SPACING, MESSAGE_BREAKPOINTS, _cacheable, apply_cache_control

BLOCKS = st.sampled_from(
    [
        {"type": "text", "text": "words"},
        {"type": "text", "text": ""},  # empty: cannot carry a marker
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "x"},
        {"type": "tool_result", "tool_use_id": "t", "content": "out"},
    ]
)
TRANSCRIPTS = st.lists(
    st.lists(BLOCKS, min_size=1, max_size=30).map(lambda blocks: {"role": "user", "content": blocks}),
    min_size=1,
    max_size=60,
)


def marked_everywhere(
    messages: list[dict[str, Any]], prefix: list[int] | None, min_prefix: int
) -> set[tuple[int, int]]:
    """The search over every block, as it was written before the tail came first."""
    flat = [(i, j, b) for i, m in enumerate(messages) for j, b in enumerate(m["content"])]
    chosen: list[int] = []
    target = len(flat) - 1
    while len(chosen) < MESSAGE_BREAKPOINTS and target >= 0:
        upper = chosen[-1] - 1 if chosen else target
        later = (k for k in range(target, upper + 1) if _cacheable(flat[k][2]))
        earlier = (k for k in range(target - 1, -1, -1) if _cacheable(flat[k][2]))
        k = next(later, None)
        if k is None:
            k = next(earlier, None)
        if k is None:
            break
        if prefix is not None and prefix[flat[k][0]] < min_prefix:
            break
        chosen.append(k)
        target = k - BREAKPOINT_SPACING
    return {(flat[k][0], flat[k][1]) for k in chosen}


def marked(messages: list[dict[str, Any]]) -> set[tuple[int, int]]:
    return {
        (i, j) for i, m in enumerate(messages) for j, b in enumerate(m["content"]) if "cache_control" in b
    }


@settings(max_examples=300, deadline=None)
@given(TRANSCRIPTS, st.integers(min_value=0, max_value=400))
def test_the_tail_search_marks_the_blocks_a_search_over_every_block_marks(
    messages: list[dict[str, Any]], min_prefix: int
) -> None:
    prefix = [10 * (i + 1) for i in range(len(messages))]
    _, out = apply_cache_control([], messages, ttl="5m", prefix_tokens=prefix, min_prefix=min_prefix)
    assert marked(out) == marked_everywhere(messages, prefix, min_prefix)
