"""Every tool validates its input against the real SQL store (both engines): ids and offsets past
64 bits, lone surrogates, NUL, paths that outgrow their column after normalization. A bad input is
an error result the model can read, never an exception; plus a fuzz suite over every tool."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.tools import ToolContext, default_registry
from agent.tools.schedule import ScheduleTool
from agent.types import AgentSession, ChatMessage
from gateway.config import TaskSettings
from gateway.scheduling.tasks import TaskBook
from gateway.store.db import Database
from gateway.store.repository import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def sql_store(database: Database) -> Store:
    """The gateway's SQL store (tests/agent's own ``store`` is the in-memory fake)."""
    return Store(database)


HUGE = [2**63, 2**63 + 1, 2**64, 10**30]
LONE = "\ud800"


async def context(store: Store) -> ToolContext:
    info = await store.get_or_create_session(
        "test:chat-1", platform="test", chat_id="chat-1", system_prompt="s", model="m"
    )
    await store.append_message(info.id, ChatMessage.user("remember the zanzibar plan"))
    session = AgentSession(
        id=info.id, system_prompt="s", model="m", context_window=200_000, key=info.key, platform="test"
    )
    return ToolContext(session, store, "scope-1", clock=lambda: NOW)


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    *[("session_search", {"query": "zanzibar", "offset": n}, "offset") for n in HUGE],
    ("session_search", {"query": "zanzibar", "limit": 2**63}, "limit"),
    ("session_search", {"query": "zanzi" + LONE}, "surrogate"),
    ("session_search", {"query": "zan\x00zibar"}, "NUL"),
    *[("recall", {"from_id": n}, "from_id") for n in HUGE],
    *[("recall", {"to_id": n}, "to_id") for n in HUGE],
    *[("recall", {"offset": n}, "offset") for n in HUGE],
    ("recall", {"from_id": -(2**63) - 1}, "from_id"),
    ("recall", {"compaction_id": "c" + LONE}, "surrogate"),
    ("memory", {"command": "create", "path": "/memories/a" + LONE, "file_text": "x"}, "surrogate"),
    ("memory", {"command": "create", "path": "/memories/a", "file_text": "x" + LONE}, "surrogate"),
    ("memory", {"command": "create", "path": "/memories/" + "\ufdfa" * 60, "file_text": "x"}, "longer"),
    ("memory", {"command": "create", "path": "/memories/" + "a/" * 300 + "b", "file_text": "x"}, "longer"),
    (
        "memory",
        {
            "command": "rename",
            "old_path": "/memories/a",
            "new_path": "/memories/" + "\ufdfa" * 60,
            "path": "/memories/a",
        },
        "longer",
    ),
    ("memory", {"command": "view", "path": "/memories", "view_range": [1, 2**63]}, "view_range"),
    (
        "memory",
        {"command": "insert", "path": "/memories/a", "insert_line": 2**63, "insert_text": "x"},
        "insert",
    ),
]


@pytest.mark.parametrize(("tool", "tool_input", "says"), REFUSED)
async def test_a_bad_input_is_an_error_result_that_names_the_problem(
    sql_store: Store, tool: str, tool_input: dict[str, Any], says: str
) -> None:
    output = await default_registry().dispatch(await context(sql_store), tool, tool_input)
    assert output.is_error, output.text
    assert says.lower() in output.text.lower(), output.text


async def test_the_largest_64_bit_offset_is_answered(sql_store: Store) -> None:
    ctx = await context(sql_store)
    search = await default_registry().dispatch(ctx, "session_search", {"query": "zanzibar", "offset": 10**9})
    recall = await default_registry().dispatch(ctx, "recall", {"from_id": 2**63 - 1})
    assert not search.is_error and "no matches" in search.text
    assert not recall.is_error and "no archived messages" in recall.text


# --- fuzz ----------------------------------------------------------------------------------------

WILD_STRING = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "/memories", "/memories/notes.md", "/memories/../etc", "%2e%2e", LONE, "\x00"]),
    st.text(alphabet=["\ufdfa", "a", "/", "\ud83d", "%", "2", "e"], max_size=700),
)
WILD_INT = st.one_of(st.integers(-(2**65), 2**65), st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, -(2**63)]))
WILD_VALUE = st.one_of(WILD_STRING, WILD_INT, st.booleans(), st.none(), st.lists(WILD_INT, max_size=3))
KEYS = [
    *["action", "prompt", "at", "cron", "every_seconds", "timezone", "id"],
    *["query", "limit", "offset", "compaction_id", "from_id", "to_id"],
    *[
        "command",
        "path",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "insert_text",
        "old_path",
        "new_path",
    ],
    "view_range",
]
COMMANDS = st.sampled_from(["view", "create", "str_replace", "insert", "delete", "rename", "other"])


@st.composite
def tool_call(draw: st.DrawFn) -> tuple[str, Any]:
    tool = draw(st.sampled_from(["session_search", "recall", "memory", "schedule"]))
    tool_input: dict[str, Any] = draw(st.dictionaries(st.sampled_from(KEYS), WILD_VALUE, max_size=5))
    if tool == "memory" and draw(st.booleans()):
        tool_input["command"] = draw(COMMANDS)
    if tool == "schedule" and draw(st.booleans()):
        tool_input["action"] = draw(st.sampled_from(["create", "list", "cancel", "other"]))
    if tool == "session_search" and draw(st.booleans()):
        tool_input["query"] = draw(WILD_STRING)
    return tool, draw(st.one_of(st.just(tool_input), WILD_VALUE)) if draw(
        st.integers(0, 9)
    ) == 0 else tool_input


async def fuzz(store: Store, calls: list[tuple[str, Any]]) -> None:
    ctx = await context(store)
    registry = default_registry()
    registry.register(ScheduleTool(TaskBook(store, TaskSettings(), timezone="UTC")))
    for tool, tool_input in calls:
        output = await registry.dispatch(ctx, tool, tool_input)  # never raises
        assert isinstance(output.text, str) and output.text


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(calls=st.lists(tool_call(), min_size=1, max_size=12))
async def test_fuzzed_tool_inputs_never_raise(sql_store: Store, calls: list[tuple[str, Any]]) -> None:
    await fuzz(sql_store, calls)


@pytest.mark.full
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(calls=st.lists(tool_call(), min_size=1, max_size=20))
async def test_fuzzed_tool_inputs_never_raise_full(sql_store: Store, calls: list[tuple[str, Any]]) -> None:
    await fuzz(sql_store, calls)
