"""The Fable rows of the model table and the per-family starting scale of the token estimate."""

from __future__ import annotations

import pytest

from agent.tokens import (
    PromptSize,
    bind_model,
    calibrate,
    cost_usd,
    estimate_prompt_tokens,
    model_info,
    starting_scale,
)
from agent.types import ChatMessage, ContextState, Usage

FABLE = ("claude-fable-5-2", "claude-fable-5-1", "claude-fable-5")


@pytest.mark.parametrize("model", FABLE)
def test_a_fable_model_gets_its_1m_window_128k_output_and_default_sampling_only(model: str) -> None:
    info = model_info(model)
    assert (info.context_window, info.max_output, info.known) == (1_000_000, 128_000, True)
    assert info.fixed_sampling and info.min_cacheable == 512


@pytest.mark.parametrize(
    ("model", "prices"),
    [
        ("claude-fable-5-2", (8.0, 40.0, 10.0, 16.0, 0.20)),
        ("claude-fable-5-1", (10.0, 50.0, 12.5, 20.0, 0.25)),
        ("claude-fable-5", (10.0, 50.0, 12.5, 20.0, 1.00)),
        ("claude-fable-5-20260609", (10.0, 50.0, 12.5, 20.0, 1.00)),
    ],
)
def test_a_fable_model_is_priced_per_part_at_its_published_rates(
    model: str, prices: tuple[float, ...]
) -> None:
    info = model_info(model)
    got = (info.input_price, info.output_price, info.write_price("5m"), info.write_price("1h"))
    assert (*got, info.read_price()) == pytest.approx(prices)


def test_fable_5_1_cache_reads_cost_a_fortieth_of_its_input() -> None:
    usage = Usage(input_tokens=0, output_tokens=0, cache_read_input_tokens=1_000_000)
    assert cost_usd("claude-fable-5-1", usage) == pytest.approx(0.25)
    assert cost_usd("claude-fable-5", usage) == pytest.approx(1.00)


def test_only_fable_5_1_refuses_a_forced_tool_choice() -> None:
    assert not model_info("claude-fable-5-1").forced_tool_choice
    assert model_info("claude-fable-5-2").forced_tool_choice
    assert model_info("claude-fable-5").forced_tool_choice
    assert model_info("claude-sonnet-5-5").forced_tool_choice


@pytest.mark.parametrize(
    ("model", "scale"),
    [
        ("claude-haiku-5-5", 1.3),
        ("claude-sonnet-5-5-20261101", 1.3),
        ("claude-opus-5", 1.3),
        ("claude-fable-5-2", 1.3),
        ("claude-haiku-4-5", 1.0),
        ("claude-sonnet-4-6", 1.0),
        ("acme-large", 1.0),
    ],
)
def test_the_starting_scale_is_per_model_family(model: str, scale: float) -> None:
    assert starting_scale(model) == scale


def _prompt(model: str, state: ContextState) -> int:
    bind_model(state, model)
    return estimate_prompt_tokens("", [ChatMessage.user("word " * 4000)], state)


def test_a_fresh_5x_session_estimates_its_prompt_at_the_family_scale_before_any_usage() -> None:
    four = _prompt("claude-haiku-4-5", ContextState())
    five = _prompt("claude-haiku-5-5", ContextState())
    assert five == pytest.approx(1.3 * four, rel=0.01)


def test_a_learned_scale_replaces_the_family_scale() -> None:
    state = ContextState()
    bind_model(state, "claude-haiku-5-5")
    calibrate(state, PromptSize(messages=10_000, overhead=500), real_tokens=500 + 12_000)
    assert state.token_scale == pytest.approx(1.2)
    rough = _prompt("claude-haiku-4-5", ContextState())
    assert _prompt("claude-haiku-5-5", state) == pytest.approx(1.2 * rough, rel=0.01)
