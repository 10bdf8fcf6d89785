"""The tool registry, session_search, recall and output capping, over the InMemoryStore."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.errors import ConfigError, ToolError
from agent.tools import (
    FunctionTool,
    RecallTool,
    ResumePoint,
    SessionSearchTool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    cap_output,
    default_registry,
)
from agent.types import ChatMessage, CompactionPlan, Insertion
from tests.agent.loop_support import make_session
from tests.fakes.memory_store import InMemoryStore

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SNAPSHOT = "snapshot at 2026-11-29 12:00:00 UTC, will not update"


def ctx_for(store: InMemoryStore, session_id: str = "s1") -> ToolContext:
    return ToolContext(make_session(session_id), store, "scope", clock=lambda: NOW)


async def echo(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
    return json.dumps(tool_input)


def echo_tool(name: str = "echo") -> FunctionTool:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["text"],
    }
    return FunctionTool(name, "Echo the input.", schema, echo)


async def archive(store: InMemoryStore, session_id: str, messages: list[ChatMessage]) -> str:
    """Archive ``messages`` (already stored) under one compaction; returns its id."""
    ids = tuple(m.id for m in messages if m.id is not None)
    summary = ChatMessage.user("summary of earlier turns", kind="summary")
    plan = CompactionPlan(
        trigger="manual",
        archive_ids=ids,
        insertions=(Insertion(anchor_id=ids[0], message=summary),),
        first_kept_id=None,
        tokens_before=100,
        tokens_after=10,
        model="test",
        duration_ms=1,
    )
    return (await store.archive_and_summarize(session_id, plan)).id


# -- registry ---------------------------------------------------------------------------------


def test_definitions_do_not_depend_on_registration_order() -> None:
    one = ToolRegistry([echo_tool("b"), echo_tool("a"), echo_tool("c")])
    two = ToolRegistry([echo_tool("c"), echo_tool("a"), echo_tool("b")])
    assert json.dumps(one.definitions()) == json.dumps(two.definitions())
    assert [d["name"] for d in one.definitions()] == ["a", "b", "c"]


def test_definitions_are_copies_the_caller_cannot_corrupt() -> None:
    registry = ToolRegistry([echo_tool()])
    registry.definitions()[0]["input_schema"]["properties"].clear()
    assert "text" in registry.definitions()[0]["input_schema"]["properties"]


def test_registering_a_name_twice_is_refused() -> None:
    registry = ToolRegistry([echo_tool()])
    with pytest.raises(ConfigError):
        registry.register(echo_tool())


def test_default_registry_offers_the_three_builtins() -> None:
    assert default_registry().names == ["memory", "recall", "session_search"]


async def test_unknown_tool_is_an_error_result() -> None:
    out = await ToolRegistry([echo_tool()]).dispatch(ctx_for(InMemoryStore()), "nope", {})
    assert out.is_error and "unknown tool 'nope'" in out.text and "echo" in out.text


async def test_missing_required_key_is_an_error_result() -> None:
    out = await ToolRegistry([echo_tool()]).dispatch(ctx_for(InMemoryStore()), "echo", {"count": 1})
    assert out.is_error and "missing required key 'text'" in out.text


@pytest.mark.parametrize("bad", [True, "3", 2.5])
async def test_wrongly_typed_value_is_an_error_result(bad: Any) -> None:
    out = await ToolRegistry([echo_tool()]).dispatch(
        ctx_for(InMemoryStore()), "echo", {"text": "x", "count": bad}
    )
    assert out.is_error and "input.count: expected integer" in out.text


async def test_non_object_input_is_an_error_result() -> None:
    out = await ToolRegistry([echo_tool()]).dispatch(ctx_for(InMemoryStore()), "echo", ["text"])
    assert out.is_error


async def test_tool_error_becomes_an_error_result() -> None:
    async def refuse(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
        raise ToolError("no, because reasons")

    registry = ToolRegistry([FunctionTool("refuse", "Refuses.", {"type": "object"}, refuse)])
    out = await registry.dispatch(ctx_for(InMemoryStore()), "refuse", {})
    assert out == ToolOutput("no, because reasons", is_error=True)


async def test_a_tool_bug_propagates() -> None:
    async def broken(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
        raise ZeroDivisionError

    registry = ToolRegistry([FunctionTool("broken", "Broken.", {"type": "object"}, broken)])
    with pytest.raises(ZeroDivisionError):
        await registry.dispatch(ctx_for(InMemoryStore()), "broken", {})


# -- session_search ---------------------------------------------------------------------------


async def test_session_search_never_returns_another_sessions_messages() -> None:
    store = InMemoryStore()
    mine = await store.append_message("s1", ChatMessage.user("the zebra lives in my chat"))
    await store.append_message("s2", ChatMessage.user("the zebra lives in the other chat"))
    out = await SessionSearchTool().run(ctx_for(store, "s1"), {"query": "zebra", "session_id": "s2"})
    ids = [int(i) for i in re.findall(r"^#(\d+)", out.text, re.M)]
    assert ids == [mine.id]


async def test_session_search_finds_archived_messages_with_their_compaction() -> None:
    store = InMemoryStore()
    old = await store.append_message("s1", ChatMessage.user("we chose the walrus plan"))
    await store.append_message("s1", ChatMessage.assistant("fine"))
    compaction_id = await archive(store, "s1", [old])
    out = await SessionSearchTool().run(ctx_for(store), {"query": "walrus"})
    assert f"#{old.id} [archived, compaction {compaction_id}]" in out.text


async def test_session_search_output_starts_with_the_snapshot_line() -> None:
    store = InMemoryStore()
    await store.append_message("s1", ChatMessage.user("hello there"))
    out = await SessionSearchTool().run(ctx_for(store), {"query": "hello"})
    assert out.text.splitlines()[0] == SNAPSHOT


async def test_session_search_marks_matches_apart_from_literal_brackets() -> None:
    store = InMemoryStore()
    await store.append_message("s1", ChatMessage.user("[bob, 10:23 UTC] the otter swims"))
    out = await SessionSearchTool().run(ctx_for(store), {"query": "otter"})
    assert "⟦otter⟧" in out.text and "⟦bob" not in out.text


async def test_session_search_with_no_match_says_so() -> None:
    out = await SessionSearchTool().run(ctx_for(InMemoryStore()), {"query": "nothing"})
    assert not out.is_error and "no matches for 'nothing'" in out.text


# -- recall -----------------------------------------------------------------------------------


async def test_recall_pages_through_archived_messages_verbatim() -> None:
    store = InMemoryStore()
    stored = [await store.append_message("s1", ChatMessage.user(f"message number {i}")) for i in range(5)]
    await store.append_message("s1", ChatMessage.assistant("still active"))
    compaction_id = await archive(store, "s1", stored)
    tool = RecallTool()
    first = await tool.run(ctx_for(store), {"compaction_id": compaction_id, "limit": 2})
    assert first.text.splitlines()[0] == SNAPSHOT
    assert "message number 0" in first.text and "message number 1" in first.text
    assert "message number 2" not in first.text
    assert first.text.endswith("next_offset: 2")
    last = await tool.run(ctx_for(store), {"compaction_id": compaction_id, "limit": 2, "offset": 4})
    assert "message number 4" in last.text and last.text.endswith("next_offset: none (end)")


async def test_recall_by_id_range_returns_only_that_range() -> None:
    store = InMemoryStore()
    stored = [await store.append_message("s1", ChatMessage.user(f"line {i}")) for i in range(4)]
    await archive(store, "s1", stored)
    assert stored[1].id is not None and stored[2].id is not None
    out = await RecallTool().run(ctx_for(store), {"from_id": stored[1].id, "to_id": stored[2].id})
    assert (
        "line 1" in out.text
        and "line 2" in out.text
        and "line 0" not in out.text
        and "line 3" not in out.text
    )


async def test_recall_does_not_reach_into_another_session() -> None:
    store = InMemoryStore()
    theirs = [await store.append_message("s2", ChatMessage.user("their secret plan"))]
    compaction_id = await archive(store, "s2", theirs)
    out = await RecallTool().run(ctx_for(store, "s1"), {"compaction_id": compaction_id})
    assert "secret" not in out.text and "next_offset: none" in out.text


async def test_recall_refuses_an_inverted_range() -> None:
    out = await default_registry().dispatch(ctx_for(InMemoryStore()), "recall", {"from_id": 9, "to_id": 2})
    assert out.is_error and "after to_id" in out.text


# -- output cap -------------------------------------------------------------------------------


async def test_truncated_recall_names_the_call_that_returns_the_rest() -> None:
    store = InMemoryStore()
    stored = [await store.append_message("s1", ChatMessage.user(f"part {i} " + "x" * 300)) for i in range(10)]
    compaction_id = await archive(store, "s1", stored)
    tool_input = {"compaction_id": compaction_id, "limit": 10}
    capped = cap_output("recall", await RecallTool().run(ctx_for(store), tool_input), 1000)
    assert len(capped.text) <= 1000
    match = re.search(r"call recall with (\{.*\}) for the rest\]$", capped.text)
    assert match is not None, capped.text
    resumed = json.loads(match.group(1))
    rest = await RecallTool().run(ctx_for(store), resumed)
    shown = set(re.findall(r"part (\d+)", capped.text))
    # Nothing is skipped: the rest starts exactly after the last complete message shown.
    assert re.findall(r"part (\d+)", rest.text)[0] == str(len(shown))


def test_cap_without_resume_points_says_what_was_cut() -> None:
    capped = cap_output("shell", ToolOutput("y" * 5000), 600)
    assert len(capped.text) <= 600
    assert capped.text.endswith("chars were cut and shell cannot page them]")
    assert "of 5000 chars" in capped.text


def test_cap_with_a_first_part_too_long_points_past_it() -> None:
    output = ToolOutput("a" * 3000 + "b" * 10, resume_points=(ResumePoint(3000, {"offset": 1}),))
    capped = cap_output("pager", output, 800)
    assert 'call pager with {"offset": 1} to continue after it]' in capped.text


def test_output_under_the_cap_is_untouched() -> None:
    output = ToolOutput("short")
    assert cap_output("t", output, 500) is output
