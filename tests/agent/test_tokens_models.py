"""The model table of agent/tokens.py: today's lineup, models: overrides, unknown models, prices."""

from __future__ import annotations

import logging

import pytest

from agent.compaction import API_LIMIT_KEY, with_api_limit
from agent.settings import ModelSpec
from agent.tokens import DEFAULT_MODEL_INFO, bind_model, closest_model, cost_usd, model_info
from agent.types import AgentSession, ContextState, Usage

CURRENT = ("claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5")
LEGACY_1M = ("claude-sonnet-5", "claude-opus-5", "claude-opus-4-6", "claude-opus-4-7", "claude-sonnet-4-6")


@pytest.mark.parametrize("model", CURRENT + LEGACY_1M)
def test_a_current_or_recent_model_gets_its_1m_window_and_128k_output(model: str) -> None:
    info = model_info(model)
    assert (info.context_window, info.max_output, info.known) == (1_000_000, 128_000, True)


def test_dated_ids_match_their_row_and_not_the_older_one() -> None:
    assert model_info("claude-opus-5-5-20261101").input_price == 4.0
    assert model_info("claude-opus-5-20260724").input_price == 5.0
    assert model_info("claude-sonnet-5-5").cache_read_price == 0.10
    assert model_info("claude-sonnet-5").cache_read_price == 0.20


def test_the_5x_models_take_only_default_sampling() -> None:
    assert all(model_info(m).fixed_sampling for m in (*CURRENT, "claude-sonnet-5", "claude-opus-5"))
    assert not model_info("claude-sonnet-4-6").fixed_sampling


def test_an_unknown_model_gets_conservative_defaults_and_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.tokens"):
        first = model_info("claude-nova-7-unlisted")
        again = model_info("claude-nova-7-unlisted")
    assert first == again == DEFAULT_MODEL_INFO
    assert not first.known and first.context_window == 200_000
    lines = [r for r in caplog.records if "claude-nova-7-unlisted" in r.getMessage()]
    assert len(lines) == 1 and "not in the model table" in lines[0].getMessage()


def test_a_misspelt_model_is_logged_with_the_closest_name_in_the_table(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.tokens"):
        model_info("claude-sonet-5-5-20261101")
    (line,) = [r.getMessage() for r in caplog.records if "claude-sonet-5-5-20261101" in r.getMessage()]
    assert "not in the model table (did you mean claude-sonnet-5-5?)" in line


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("claude-sonet-5-5", "claude-sonnet-5-5"),
        ("claude-opus-5.5", "claude-opus-5-5"),
        ("claude-haiku5-5", "claude-haiku-5-5"),
        ("Claude-3-5-Sonet-latest", "claude-3-5-sonnet"),
    ],
)
def test_the_closest_model_is_a_full_name_of_the_table(given: str, meant: str) -> None:
    assert closest_model(given) == meant


@pytest.mark.parametrize("given", ["claude-sonnet-5-5", "gpt-4o", "claude-nova-9", "sonnet"])
def test_a_known_or_faraway_name_has_no_closest_model(given: str) -> None:
    assert closest_model(given) is None


def test_the_closest_model_may_be_one_of_the_models_section() -> None:
    assert closest_model("acme-larg-2", ["acme-large-2"]) == "acme-large-2"


def test_a_models_entry_adds_an_unknown_model() -> None:
    spec = ModelSpec(context_window=400_000, max_output=32_000, input_price=1.5, output_price=7.5)
    info = model_info("acme-llm-2", overrides={"acme-llm": spec})
    assert (info.context_window, info.max_output, info.input_price, info.output_price) == (
        400_000,
        32_000,
        1.5,
        7.5,
    )
    assert info.known


def test_a_models_entry_overrides_only_what_it_names() -> None:
    spec = ModelSpec(min_cache_prefix=2048, cache_read_price=0.05)
    info = model_info("claude-sonnet-5-5", overrides={"sonnet-5-5": spec, "sonnet": ModelSpec(max_output=1)})
    assert (info.min_cacheable, info.cache_read_price) == (2048, 0.05)
    assert (info.context_window, info.max_output, info.input_price) == (1_000_000, 128_000, 2.0)


def test_one_hour_writes_are_priced_at_their_own_rate() -> None:
    usage = Usage(cache_creation_input_tokens=1_000_000, cache_creation_1h_input_tokens=400_000)
    # Sonnet 5.5: 5m writes $2.50/MTok, 1h writes $4/MTok.
    assert cost_usd("claude-sonnet-5-5", usage) == pytest.approx(0.6 * 2.50 + 0.4 * 4.0)
    # The turn's TTL does not reprice a split the API reported.
    assert cost_usd("claude-sonnet-5-5", usage, cache_ttl="1h") == pytest.approx(0.6 * 2.50 + 0.4 * 4.0)


def test_reads_and_writes_use_the_published_prices_not_the_old_multipliers() -> None:
    reads = Usage(cache_read_input_tokens=1_000_000)
    assert cost_usd("claude-opus-5-5", reads) == pytest.approx(0.20)  # 0.05x input, not 0.1x
    writes = Usage(cache_creation_input_tokens=1_000_000, cache_creation_1h_input_tokens=1_000_000)
    assert cost_usd("claude-opus-5-5", writes) == pytest.approx(8.0)


def test_haiku_5_5_prices_a_long_prompt_at_its_higher_tier() -> None:
    short = Usage(input_tokens=100_000, output_tokens=1_000_000)
    long = Usage(input_tokens=100_001, output_tokens=1_000_000)
    assert cost_usd("claude-haiku-5-5", short) == pytest.approx(0.1 * 0.10 + 0.50)
    assert cost_usd("claude-haiku-5-5", long) == pytest.approx(0.100001 * 0.50 + 2.50)


def _session(model: str) -> AgentSession:
    return AgentSession(id="s", system_prompt="sys", model=model, context_window=1_000_000)


def test_a_calibration_learned_on_one_model_never_applies_to_another() -> None:
    state = ContextState(
        token_scale=1.8,
        token_scale_model="claude-sonnet-4-6",
        last_prompt_tokens=90_000,
        last_prompt_estimate=50_000,
        extra={API_LIMIT_KEY: 150_000},
    )
    session = with_api_limit(_session("claude-sonnet-5-5"), state)
    assert session.context_window == 1_000_000  # 4.6's reported limit is not 5.5's
    assert (state.token_scale, state.last_prompt_tokens, state.token_scale_model) == (
        None,
        None,
        "claude-sonnet-5-5",
    )


def test_the_same_models_calibration_is_kept() -> None:
    state = ContextState(
        token_scale=1.3, token_scale_model="claude-sonnet-5-5", extra={API_LIMIT_KEY: 900_000}
    )
    session = with_api_limit(_session("claude-sonnet-5-5"), state)
    assert (session.context_window, state.token_scale) == (900_000, 1.3)


def test_a_calibration_stored_before_models_were_recorded_is_kept_for_the_session_model() -> None:
    state = ContextState(token_scale=1.2, last_prompt_tokens=5_000, last_prompt_estimate=4_000)
    assert not bind_model(state, "claude-sonnet-5-5")
    assert (state.token_scale, state.last_prompt_tokens, state.token_scale_model) == (
        1.2,
        5_000,
        "claude-sonnet-5-5",
    )
