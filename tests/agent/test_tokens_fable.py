"""The Fable rows of the model table and the per-family starting scale of the token estimate."""

from __future__ import annotations

import pytest

from agent.tokens import PromptSize, bind_model, calibrate, cost_usd, model_info, starting_scale
from agent.types import ContextState, Usage

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


def test_a_fresh_5x_session_estimates_with_its_family_scale_before_any_usage() -> None:
    state = ContextState()
    bind_model(state, "claude-haiku-5-5")
    assert state.token_scale == 1.3
    other = ContextState()
    bind_model(other, "claude-haiku-4-5")
    assert other.token_scale is None


def test_the_first_reported_usage_replaces_the_family_seed_outright() -> None:
    state = ContextState()
    bind_model(state, "claude-haiku-5-5")
    calibrate(state, PromptSize(messages=10_000, overhead=500), real_tokens=500 + 12_000)
    assert state.token_scale == pytest.approx(1.2)
    calibrate(state, PromptSize(messages=10_000, overhead=500), real_tokens=500 + 15_000)
    assert state.token_scale == pytest.approx(1.2 + 0.3 * (1.5 - 1.2))


def test_switching_to_a_5x_model_reseeds_the_scale_for_its_family() -> None:
    state = ContextState()
    bind_model(state, "claude-haiku-4-5")
    calibrate(state, PromptSize(messages=10_000, overhead=500), real_tokens=500 + 10_000)
    assert state.token_scale == pytest.approx(1.0)
    bind_model(state, "claude-haiku-5-5")
    assert state.token_scale == 1.3
