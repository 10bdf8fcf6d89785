"""The transcript rules for the API's server tool blocks (the tool search tool's call and result):
kept in the assistant message as they came, never paired with a client tool_result."""

from __future__ import annotations

from typing import Any

from agent.transcript import validate_wire
from agent.types import content_text

USE: dict[str, Any] = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "tool_search_tool_bm25",
    "input": {"query": "weather"},
}
RESULT: dict[str, Any] = {
    "type": "tool_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
    },
}


def test_a_search_call_and_its_result_need_no_client_tool_result() -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [USE, RESULT, {"type": "text", "text": "found it"}]},
        {"role": "user", "content": "thanks"},
    ]
    assert validate_wire(messages) == []


def test_server_tool_blocks_in_a_user_message_are_refused() -> None:
    messages = [{"role": "user", "content": [USE, RESULT]}]
    problems = validate_wire(messages)
    assert any("only allowed in assistant messages" in p for p in problems)


def test_a_search_result_before_its_call_is_refused() -> None:
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": [RESULT, USE]}]
    assert any("must follow its server_tool_use" in p for p in validate_wire(messages))


def test_search_blocks_flatten_to_their_query_and_the_tools_found() -> None:
    text = content_text([USE, RESULT])
    assert '[tool search] {"query": "weather"}' in text and "[tools found] get_weather" in text


def test_a_paused_turn_may_hold_the_result_in_its_next_message() -> None:
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [USE]},
        {"role": "assistant", "content": [RESULT, {"type": "text", "text": "found"}]},
    ]
    assert validate_wire(messages) == []
