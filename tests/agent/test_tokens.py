"""Token estimation, the model table, calibration and cost."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agent.tokens import (
    _WIDE,
    DEFAULT_MODEL_INFO,
    IMAGE_TOKENS,
    MAX_SCALE,
    MIN_SCALE,
    TOOL_PREAMBLE_TOKENS,
    PromptSize,
    calibrate,
    cost_usd,
    estimate_message_tokens,
    estimate_messages_tokens,
    estimate_prompt_tokens,
    estimate_text_tokens,
    estimate_tokens,
    model_info,
)
from agent.types import ChatMessage, ContextState, Usage


def test_latin_text_is_about_four_chars_per_token() -> None:
    assert estimate_text_tokens("a" * 400) == 100
    assert estimate_text_tokens("") == 0


def test_cjk_hangul_and_kana_count_one_token_per_char() -> None:
    assert estimate_text_tokens("漢字漢字") == 4
    assert estimate_text_tokens("한국어") == 3
    assert estimate_text_tokens("ひらがなカタカナ") == 8
    assert estimate_text_tokens("漢字 abcd") == 2 + 2  # " abcd" is 5 narrow chars -> 2


def test_images_count_a_fixed_amount() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 100_000}}
    m = ChatMessage(role="user", content=[image])
    assert IMAGE_TOKENS <= estimate_message_tokens(m) < IMAGE_TOKENS + 10


def test_tool_blocks_count_their_json() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "x" * 4000}}
    assert estimate_message_tokens(ChatMessage(role="assistant", content=[use])) > 1000
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "y" * 4000}]}
    assert estimate_message_tokens(ChatMessage(role="user", content=[result])) >= 1000


def test_calibrated_estimate_uses_the_learned_scale() -> None:
    ms = [ChatMessage.user("z" * 3000)]
    assert estimate_messages_tokens(ms, scale=2.0) == 2 * estimate_messages_tokens(ms)
    state = ContextState(token_scale=2.0)
    assert estimate_tokens("漢字" * 100, state) == 400  # the scale multiplies the script-aware estimate


def test_calibration_takes_the_fixed_overhead_out() -> None:
    state = ContextState()
    # 10,000 rough message tokens; the real count includes 3,000 tokens of tools and preamble.
    calibrate(state, PromptSize(messages=10_000, overhead=3_000), 13_000)
    assert state.token_scale == 1.0
    calibrate(state, PromptSize(messages=10_000, overhead=3_000), 15_000)
    assert state.token_scale == pytest.approx(1.0 + 0.3 * 0.2)


def test_calibration_waits_until_the_messages_outweigh_the_overhead() -> None:
    state = ContextState()
    calibrate(state, PromptSize(messages=60, overhead=2_500), 2_700)  # three small turns and the tools
    assert state.token_scale is None


def test_calibration_is_clamped_and_ignores_nonsense() -> None:
    state = ContextState()
    calibrate(state, PromptSize(messages=1_000, overhead=0), 1_000_000)
    assert state.token_scale == MAX_SCALE
    calibrate(state, PromptSize(messages=1_000, overhead=0), 0)
    assert state.token_scale == MAX_SCALE
    fresh = ContextState()
    calibrate(fresh, PromptSize(messages=1_000, overhead=900), 901)
    assert fresh.token_scale == MIN_SCALE


def test_the_estimate_is_the_last_real_count_plus_calibrated_growth() -> None:
    ms = [ChatMessage.user("a" * 400)]
    state = ContextState(
        last_prompt_tokens=5_000, last_prompt_estimate=estimate_messages_tokens(ms), token_scale=2.0
    )
    grown = [*ms, ChatMessage.user("b" * 396)]  # 99 + 4 rough tokens more
    assert estimate_prompt_tokens("sys", grown, state) == 5_000 + 2 * 103


def test_without_a_real_count_the_estimate_adds_the_tool_preamble() -> None:
    tools = [{"name": "t", "description": "d", "input_schema": {"type": "object"}}]
    ms = [ChatMessage.user("a" * 400)]
    without = estimate_prompt_tokens("sys", ms, ContextState())
    assert estimate_prompt_tokens("sys", ms, ContextState(), tools=tools) > without + TOOL_PREAMBLE_TOKENS


def test_model_table_longest_substring_wins() -> None:
    assert model_info("claude-opus-4-5-20251101").min_cacheable == 4096
    assert model_info("claude-opus-4-1-20250805").min_cacheable == 1024
    assert model_info("claude-haiku-4-5").min_cacheable == 4096
    assert model_info("claude-3-5-haiku-latest").min_cacheable == 2048
    assert model_info("claude-sonnet-4-5").context_window == 200_000
    assert model_info("claude-sonnet-4-5").input_price == 3.0


def test_unknown_model_gets_conservative_default_and_override() -> None:
    assert model_info("some-new-model") == DEFAULT_MODEL_INFO
    assert model_info("some-new-model", context_window_override=50_000).context_window == 50_000


def test_price_override_by_substring() -> None:
    info = model_info("claude-sonnet-4-5", prices={"sonnet": (1.0, 2.0), "sonnet-4-5": (4.0, 8.0)})
    assert (info.input_price, info.output_price) == (4.0, 8.0)


def test_cost_counts_cache_writes_and_reads() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd("claude-sonnet-4-5", usage) == pytest.approx(3.0 + 15.0)
    writes = Usage(cache_creation_input_tokens=1_000_000)
    assert cost_usd("claude-sonnet-4-5", writes) == pytest.approx(3.75)
    assert cost_usd("claude-sonnet-4-5", writes, cache_ttl="1h") == pytest.approx(6.0)
    reads = Usage(cache_read_input_tokens=1_000_000)
    assert cost_usd("claude-sonnet-4-5", reads) == pytest.approx(0.3)


@hsettings(max_examples=400, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(["a", " ", "\n", "é", "…", "中", "한", "カ", "\uff01", "😀", "\ud800"]))
)
def test_the_wide_count_equals_matching_every_character(text: str) -> None:
    wide = len(_WIDE.findall(text))
    assert estimate_text_tokens(text) == (wide + math.ceil((len(text) - wide) / 4) if text else 0)
