"""Cache breakpoints (the system block and message blocks spaced for the lookback) and the TTL choice."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.prompt_caching import BREAKPOINT_SPACING, apply_cache_control, choose_ttl
from agent.transcript import count_cache_breakpoints

_BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=5)),
    st.just({"type": "thinking", "thinking": "hmm", "signature": "s"}),
    st.just({"type": "text", "text": "cached", "cache_control": {"type": "ephemeral"}}),
    st.just({"type": "tool_result", "tool_use_id": "t", "content": "ok"}),
)
_MESSAGE = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant"]),
    st.one_of(st.lists(_BLOCK, max_size=4), st.text(max_size=5)),
)
_SYSTEM = st.lists(_BLOCK, max_size=3)


@given(_SYSTEM, st.lists(_MESSAGE, max_size=10), st.sampled_from(["5m", "1h"]))
@settings(max_examples=150)
def test_never_more_than_four_breakpoints_never_mutates_idempotent(
    system: list[dict[str, Any]], messages: list[dict[str, Any]], ttl: str
) -> None:
    before = copy.deepcopy((system, messages))
    new_system, new_messages = apply_cache_control(system, messages, ttl=ttl)
    assert (system, messages) == before
    assert count_cache_breakpoints(new_messages, new_system) <= 4
    assert apply_cache_control(new_system, new_messages, ttl=ttl) == (new_system, new_messages)
    for block in [
        *new_system,
        *(b for m in new_messages if isinstance(m["content"], list) for b in m["content"]),
    ]:
        if "cache_control" in block:
            assert block["type"] != "thinking" and (block["type"] != "text" or block["text"])


def test_marks_last_system_block_and_message_blocks_spaced_for_the_lookback() -> None:
    system = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(60)]
    new_system, new_messages = apply_cache_control(system, messages, ttl="5m")
    assert "cache_control" not in new_system[0] and new_system[1]["cache_control"] == {"type": "ephemeral"}
    marked = [i for i, m in enumerate(new_messages) if isinstance(m["content"], list)]
    assert marked == [59 - 2 * BREAKPOINT_SPACING, 59 - BREAKPOINT_SPACING, 59]


def test_a_short_conversation_needs_only_the_last_block_marked() -> None:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(6)]
    _, new_messages = apply_cache_control([], messages, ttl="5m")
    assert [i for i, m in enumerate(new_messages) if isinstance(m["content"], list)] == [5]


def test_spacing_counts_blocks_and_skips_uncacheable_ones() -> None:
    # One message of many blocks: the marks land inside it, on cacheable blocks only.
    blocks: list[dict[str, object]] = [{"type": "text", "text": f"b{i}"} for i in range(40)]
    blocks[39 - BREAKPOINT_SPACING] = {"type": "thinking", "thinking": "x", "signature": "s"}
    _, new_messages = apply_cache_control([], [{"role": "user", "content": blocks}], ttl="5m")
    marked = [i for i, b in enumerate(new_messages[0]["content"]) if "cache_control" in b]
    assert marked == [39 - 2 * BREAKPOINT_SPACING + 1, 39 - BREAKPOINT_SPACING + 1, 39]


def test_one_hour_ttl_is_spelled_out() -> None:
    new_system, _ = apply_cache_control([{"type": "text", "text": "s"}], [], ttl="1h")
    assert new_system[0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_system_prompt_bytes_identical_across_fifty_turns() -> None:
    system = [{"type": "text", "text": "You are Hygieia." * 50}]
    messages: list[dict[str, Any]] = []
    seen = set()
    for turn in range(50):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"turn {turn}"}]})
        new_system, new_messages = apply_cache_control(system, messages, ttl="5m")
        seen.add(repr(new_system))
        assert count_cache_breakpoints(new_messages, new_system) <= 4
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"reply {turn}"}]})
    assert len(seen) == 1


def test_auto_ttl_follows_the_median_gap_between_user_messages() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    quick = [start + timedelta(seconds=30 * i) for i in range(5)]
    slow = [start + timedelta(minutes=20 * i) for i in range(5)]
    assert choose_ttl("auto", quick) == "5m"
    assert choose_ttl("auto", slow) == "1h"
    assert choose_ttl("auto", []) == "5m"
    assert choose_ttl("1h", quick) == "1h" and choose_ttl("5m", slow) == "5m"
