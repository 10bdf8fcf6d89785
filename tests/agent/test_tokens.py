"""Token estimation, the model table, calibration and cost."""

from __future__ import annotations

import pytest

from agent.tokens import (
    DEFAULT_MODEL_INFO,
    IMAGE_TOKENS,
    calibrate,
    cost_usd,
    estimate_message_tokens,
    estimate_messages_tokens,
    estimate_text_tokens,
    messages_chars,
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


def test_calibrated_estimate_uses_learned_ratio() -> None:
    ms = [ChatMessage.user("z" * 3000)]
    assert estimate_messages_tokens(ms, chars_per_token=2.0) == messages_chars(ms) // 2
    assert estimate_messages_tokens(ms) < estimate_messages_tokens(ms, chars_per_token=2.0)


def test_calibrate_smooths_and_clamps() -> None:
    state = ContextState()
    calibrate(state, 30_000, 10_000)
    assert state.chars_per_token == 3.0
    calibrate(state, 50_000, 10_000)
    assert state.chars_per_token == pytest.approx(3.0 + 0.3 * 2.0)
    calibrate(state, 1, 10_000)
    assert state.chars_per_token >= 1.0
    fresh = ContextState()
    calibrate(fresh, 1_000_000, 10)
    assert fresh.chars_per_token == 8.0
    calibrate(fresh, 100, 0)  # nonsense is ignored
    assert fresh.chars_per_token == 8.0


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
