"""The API validity rules and the tool-pair repair."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.transcript import WireCheck, repair_tool_pairs, validate_messages, validate_wire
from agent.types import ChatMessage


def use(tool_id: str) -> ChatMessage:
    return ChatMessage(
        role="assistant", content=[{"type": "tool_use", "id": tool_id, "name": "t", "input": {}}]
    )


def result(tool_id: str) -> ChatMessage:
    return ChatMessage(
        role="user", content=[{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}]
    )


def test_a_complete_tool_round_is_valid() -> None:
    assert (
        validate_messages([ChatMessage.user("hi"), use("a"), result("a"), ChatMessage.assistant("done")])
        == []
    )


def test_an_orphan_tool_result_is_reported() -> None:
    problems = validate_messages([ChatMessage.user("hi"), ChatMessage.assistant("x"), result("a")])
    assert any("unexpected tool_use_id" in p for p in problems)


def test_a_tool_use_without_result_is_reported() -> None:
    problems = validate_messages([ChatMessage.user("hi"), use("a"), ChatMessage.user("next")])
    assert any("without tool_result" in p for p in problems)


def test_empty_content_and_empty_text_are_reported() -> None:
    assert validate_wire([{"role": "user", "content": []}])
    assert validate_wire([{"role": "user", "content": [{"type": "text", "text": ""}]}])
    assert validate_wire([])


def test_a_transcript_must_start_with_a_user_turn() -> None:
    assert validate_messages([ChatMessage.assistant("hello")])


def test_five_cache_breakpoints_are_one_too_many() -> None:
    block = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    messages = [{"role": "user", "content": [dict(block)]}, {"role": "assistant", "content": [dict(block)]}]
    system = [dict(block), dict(block), dict(block)]
    assert any("maximum of 4" in p for p in validate_wire(messages, system))


def test_consecutive_user_messages_merge_into_one_turn() -> None:
    view = [ChatMessage.user("a"), ChatMessage.user("b"), use("x"), result("x"), ChatMessage.user("c")]
    assert validate_messages(view) == []


def test_a_trailing_tool_use_is_kept_by_repair() -> None:
    view = [ChatMessage.user("hi"), use("a")]
    assert repair_tool_pairs(view) == view


def test_repair_does_not_mutate_its_input() -> None:
    view = [ChatMessage.user("hi"), result("zz"), ChatMessage.assistant("ok")]
    snapshot = [m.content for m in view]
    repair_tool_pairs(view)
    assert [m.content for m in view] == snapshot


_messages = st.lists(
    st.one_of(
        st.builds(ChatMessage.user, st.sampled_from(["a", "b"])),
        st.builds(ChatMessage.assistant, st.sampled_from(["x", "y"])),
        st.builds(use, st.sampled_from(["t1", "t2", "t3"])),
        st.builds(result, st.sampled_from(["t1", "t2", "t3"])),
    ),
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(_messages)
def test_repair_always_yields_a_valid_transcript_body(view: list[ChatMessage]) -> None:
    repaired = repair_tool_pairs([ChatMessage.user("start"), *view, ChatMessage.user("end")])
    assert [p for p in validate_messages(repaired) if "unique" not in p] == []


_wire_blocks = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.sampled_from(["", "x"])}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": st.sampled_from("abc"), "name": st.just("t")}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": st.sampled_from("abc")}),
    st.fixed_dictionaries({"type": st.just("text"), "text": st.just("m"), "cache_control": st.just({})}),
    st.just({"text": "no type"}),
)
_wire_messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system"]),
            "content": st.one_of(st.lists(_wire_blocks, max_size=3), st.sampled_from(["", "s"])),
        }
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(
    start=_wire_messages,
    steps=st.lists(st.tuples(_wire_messages, st.integers(0, 12), st.integers(-1, 12)), max_size=5),
)
def test_a_resumed_check_finds_what_a_whole_check_finds(
    start: list[dict[str, Any]], steps: list[tuple[list[dict[str, Any]], int, int]]
) -> None:
    check = WireCheck()
    messages = list(start)
    for added, stable, replaced in steps:
        messages = messages + added
        if 0 <= replaced < len(messages):
            messages[replaced] = {"role": "user", "content": [{"type": "text", "text": "new"}]}
        assert check.problems(messages, stable=stable) == validate_wire(messages)
