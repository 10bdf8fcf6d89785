"""Reading the cache diagnostics: the API's answer, and our own reasons where it names none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.cache_diagnostics import Sent, learned, read_reason, remember
from agent.provider import LLMRequest, LLMResponse
from agent.types import CacheCheck, ChatMessage, ContextState, Usage

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
REQUEST = LLMRequest(
    model="claude-sonnet-4-6", messages=[], max_tokens=100, diagnostics={"previous_message_id": "msg_1"}
)
VIEW = [ChatMessage.user("hello")]


def _state(ttl: str) -> ContextState:
    state = ContextState()
    remember(state, Sent("msg_1", REQUEST.model, "", 0, 0, None, at=T0, ttl=ttl))
    return state


def _unread_call() -> LLMResponse:
    usage = Usage(input_tokens=10, cache_creation_input_tokens=2_000, cache_read_input_tokens=0)
    return LLMResponse(content=[], stop_reason="end_turn", usage=usage, model=REQUEST.model, id="msg_2")


def test_a_quiet_time_past_the_ttl_the_previous_call_was_written_with_is_expired_and_ours() -> None:
    check = learned(_state("5m"), REQUEST, VIEW, _unread_call(), "none", "1h", T0 + timedelta(minutes=10))
    assert check == CacheCheck("expired", None, "ttl", True)


def test_within_the_previous_call_s_ttl_nothing_read_is_unread_even_if_this_call_s_ttl_is_shorter() -> None:
    check = learned(_state("1h"), REQUEST, VIEW, _unread_call(), "none", "5m", T0 + timedelta(minutes=10))
    assert check == CacheCheck("unread", None, "none", False)


def test_the_chain_moves_on_to_the_answered_call() -> None:
    state = _state("5m")
    learned(state, REQUEST, VIEW, _unread_call(), "none", "5m", T0)
    assert state.extra["cache_diagnostics"]["previous_message_id"] == "msg_2"


@pytest.mark.parametrize(
    ("diagnostics", "read"),
    [
        (None, None),
        ({"cache_miss_reason": None}, None),
        (
            {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 900}},
            ("tools_changed", 900),
        ),
        ({"cache_miss_reason": {"type": "previous_message_not_found"}}, ("previous_message_not_found", None)),
        ({"cache_miss_reason": {"type": "a_reason_from_the_future"}}, ("other", None)),
        (
            {"cache_miss_reason": {"type": "model_changed", "cache_missed_input_tokens": -4}},
            ("model_changed", None),
        ),
        ("not an object", ("other", None)),
    ],
)
def test_the_answer_is_read_and_never_trusted_blindly(
    diagnostics: Any, read: tuple[str, int | None] | None
) -> None:
    assert read_reason(diagnostics) == read


def test_a_previous_call_sent_uncached_makes_the_miss_one_of_our_policy() -> None:
    check = learned(_state("none"), REQUEST, VIEW, _unread_call(), "none", "5m", T0 + timedelta(minutes=1))
    assert check == CacheCheck("expired", None, "ttl", True)
