"""The "auto" TTL: priced over the gaps between a session's turns (none when caching cannot pay)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.loop_request import note_turn_calls, note_turn_start, turn_ttl
from agent.prompt_caching import TURN_GAPS_KEY, cheapest_ttl
from agent.tokens import model_info
from agent.types import ContextState

SONNET = {"read": 0.05, "write_5m": 1.25, "write_1h": 2.0}


def test_quick_turns_take_five_minutes() -> None:
    assert cheapest_ttl([60, 120, 200, 90], 1.0, **SONNET) == "5m"


def test_turns_tens_of_minutes_apart_take_an_hour() -> None:
    assert cheapest_ttl([600, 1500, 2400, 200, 900], 1.0, **SONNET) == "1h"


def test_turns_hours_apart_with_one_call_each_are_not_cached() -> None:
    assert cheapest_ttl([7200, 10_800, 5400], 1.0, **SONNET) is None


def test_tool_rounds_make_caching_pay_even_when_every_first_call_misses() -> None:
    assert cheapest_ttl([7200, 10_800, 5400], 3.0, **SONNET) == "5m"


def test_the_loop_remembers_the_gaps_between_turns_and_prices_them() -> None:
    state = ContextState()
    start = datetime(2026, 12, 1, tzinfo=UTC)
    for hour in range(5):
        state.last_prompt_at = start + timedelta(hours=2 * hour)
        note_turn_start(state, state.last_prompt_at + timedelta(hours=2))
        note_turn_calls(state, 1)
    assert state.extra[TURN_GAPS_KEY] == [7200.0] * 5
    assert turn_ttl("auto", [], state, model_info("claude-sonnet-5-5")) is None
    assert turn_ttl("5m", [], state, model_info("claude-sonnet-5-5")) == "5m"
