"""A session's next request reuses the unchanged prefix of its previous one, and is the same
request as one built from nothing, whatever happened to the view in between."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.errors import InvalidRequest
from agent.loop_request import build_request
from agent.request_memo import RequestMemo, RequestMemos
from agent.types import AgentSession, ChatMessage

SESSION = AgentSession(id="s", system_prompt="sys " * 50, model="claude-sonnet-4-6", context_window=200_000)
PLAIN = AgentSession(id="p", system_prompt="sys", model="claude-3-haiku", context_window=200_000)
TOOLS = [{"name": "t", "description": "a tool", "input_schema": {"type": "object"}}]


def _search_result() -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": "u0",
        "content": [
            {
                "type": "search_result",
                "source": "s",
                "title": "t",
                "content": [{"type": "text", "text": "found"}],
            }
        ],
    }


def _message(kind: str, n: int) -> list[ChatMessage]:
    if kind == "user":
        return [ChatMessage.user(f"question {n} " * (n % 7 + 1))]
    if kind == "assistant":
        return [ChatMessage.assistant(f"answer {n}")]
    if kind == "round":
        use = {"type": "tool_use", "id": f"u{n}", "name": "t", "input": {"n": n}}
        result = {"type": "tool_result", "tool_use_id": f"u{n}", "content": f"result {n}"}
        return [ChatMessage(role="assistant", content=[use]), ChatMessage(role="user", content=[result])]
    if kind == "orphan":  # a result whose tool_use is gone: the build repairs it
        return [
            ChatMessage(role="user", content=[{"type": "tool_result", "tool_use_id": "gone", "content": "x"}])
        ]
    if kind == "marked":  # a stored block that carries a marker of its own
        return [
            ChatMessage(
                role="user", content=[{"type": "text", "text": "m", "cache_control": {"type": "ephemeral"}}]
            )
        ]
    if kind == "search":
        use = {"type": "tool_use", "id": "u0", "name": "t", "input": {}}
        return [
            ChatMessage(role="assistant", content=[use]),
            ChatMessage(role="user", content=[_search_result()]),
        ]
    raise AssertionError(kind)


KINDS = ("user", "assistant", "round", "orphan", "marked", "search")
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.sampled_from(KINDS), min_size=1, max_size=4)),
        st.tuples(st.just("edit"), st.integers(0, 200)),
        st.tuples(st.just("compact"), st.integers(1, 30)),
    ),
    min_size=1,
    max_size=12,
)


def _build(session: AgentSession, view: list[ChatMessage], ttl: str | None, memo: RequestMemo | None) -> Any:
    try:
        request, sent = build_request(session, view, TOOLS, max_tokens=100, cache_ttl=ttl, memo=memo)
    except InvalidRequest as exc:
        return ("invalid", str(exc))
    return (request, sent)


@settings(max_examples=150, deadline=None)
@given(steps=STEPS, ttl=st.sampled_from([None, "5m", "1h"]), plain=st.booleans())
def test_a_request_built_on_the_previous_one_is_the_request_built_from_nothing(
    steps: list[tuple[str, Any]], ttl: str | None, plain: bool
) -> None:
    session = PLAIN if plain else SESSION
    memo = RequestMemo()
    view: list[ChatMessage] = [ChatMessage.user("hello")]
    n = 0
    for op, arg in steps:
        if op == "append":
            for kind in arg:
                n += 1
                view = view + _message(kind, n)
        elif op == "edit" and view:
            index = arg % len(view)
            view = [
                *view[:index],
                view[index].with_content([{"type": "text", "text": f"edited {n}"}]),
                *view[index + 1 :],
            ]
        elif op == "compact":
            view = [ChatMessage.user("summary"), *view[arg:]]
        assert _build(session, view, ttl, memo) == _build(session, view, ttl, None)


def test_the_unchanged_prefix_is_reused_not_built_again() -> None:
    memo = RequestMemo()
    view = [ChatMessage.user("a"), ChatMessage.assistant("b"), ChatMessage.user("c")]
    first, _ = memo.wires(view, plain=False)
    second, sums = memo.wires([*view, ChatMessage.assistant("d")], plain=False)
    assert all(a is b for a, b in zip(first, second[:3], strict=True))
    assert len(second) == 4 and sums == sorted(sums)


def test_marking_a_request_leaves_the_memos_messages_unmarked() -> None:
    memo = RequestMemo()
    view = [ChatMessage.user(f"m{i}") if i % 2 == 0 else ChatMessage.assistant(f"m{i}") for i in range(41)]
    request, _ = build_request(SESSION, view, [], max_tokens=100, cache_ttl="5m", memo=memo)
    assert any("cache_control" in b for m in request.messages for b in m["content"])
    wires, _ = memo.wires(view, plain=False)
    assert not any("cache_control" in b for m in wires for b in m["content"])


def test_memos_keep_the_most_recently_used_sessions() -> None:
    memos = RequestMemos(capacity=2)
    a, b = memos.get("a"), memos.get("b")
    assert memos.get("a") is a
    memos.get("c")  # "b" is the least recently used
    assert memos.get("a") is a and memos.get("b") is not b
