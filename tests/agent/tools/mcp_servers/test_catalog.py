"""The catalog: tool names, include/exclude globs, allow rules, and offers frozen per session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from agent.tools import ToolContext, default_registry
from agent.tools.mcp_servers import McpCatalog, ServerSpec, ToolCallRecord, wire_name
from agent.tools.scope import ADMIN_SCOPE, ToolFilter, ToolScope
from agent.types import ContextState
from tests.agent.loop_support import make_session
from tests.fakes.mcp_tools import tools_server
from tests.fakes.memory_store import InMemoryStore

MEMORY = "memory"  # the spec's transport is replaced by the in-process server


@asynccontextmanager
async def catalog(*specs: ServerSpec, **kw: Any) -> AsyncIterator[McpCatalog]:
    targets = {spec.name: tools_server(spec.name) for spec in specs}
    async with McpCatalog(specs, targets=targets, **kw) as built:
        yield built


def names(found: Any) -> list[str]:
    return sorted(tool.name for tool in found)


async def test_tools_are_named_mcp_server_tool_with_the_servers_description_and_schema() -> None:
    async with catalog(ServerSpec(name="fake", url=MEMORY)) as cat:
        tools = {t.name: t for t in cat.tools_for(ADMIN_SCOPE)}
    echo = tools["mcp_fake_echo"]
    assert echo.description == "Echo the text back."
    assert echo.input_schema["properties"]["text"]["type"] == "string"
    assert echo.definition()["input_schema"]["required"] == ["text"]


def test_wire_names_keep_to_the_apis_rule() -> None:
    assert wire_name("git.hub", "search issues") == "mcp_git_hub_search_issues"
    long = wire_name("server", "t" * 100)
    assert len(long) == 64 and long.startswith("mcp_server_ttt")
    assert long != wire_name("server", "t" * 99)


async def test_include_globs_keep_only_the_matching_tools() -> None:
    spec = ServerSpec(name="fake", url=MEMORY, tools=ToolFilter(include=("e*", "add")))
    async with catalog(spec) as cat:
        found = names(cat.tools_for(ADMIN_SCOPE))
    assert found == ["mcp_fake_add", "mcp_fake_echo", "mcp_fake_environment"]


async def test_exclude_globs_leave_the_matching_tools_out() -> None:
    spec = ServerSpec(name="fake", url=MEMORY, tools=ToolFilter(exclude=("e*", "crash")))
    async with catalog(spec) as cat:
        found = names(cat.tools_for(ADMIN_SCOPE))
    assert "mcp_fake_add" in found
    assert not {"mcp_fake_echo", "mcp_fake_environment", "mcp_fake_crash"} & set(found)


async def test_without_allow_rules_only_admins_are_offered_the_tools() -> None:
    async with catalog(ServerSpec(name="fake", url=MEMORY)) as cat:
        assert cat.tools_for(ToolScope("telegram", "42", "42", is_admin=False)) == []
        assert cat.tools_for(ToolScope("telegram", "1", "1", is_admin=True)) != []


async def test_allow_rules_name_users_chats_or_everyone() -> None:
    specs = (
        ServerSpec(name="byuser", url=MEMORY, allow=("user:telegram:42",)),
        ServerSpec(name="bychat", url=MEMORY, allow=("chat:discord:9",)),
        ServerSpec(name="all", url=MEMORY, allow=("*",)),
    )
    async with catalog(*specs) as cat:

        def servers(scope: ToolScope) -> set[str]:
            return {t.name.split("_")[1] for t in cat.tools_for(scope)}

        assert servers(ToolScope("telegram", "42", "100")) == {"byuser", "all"}
        assert servers(ToolScope("discord", "42", "9")) == {"bychat", "all"}
        assert servers(ToolScope("telegram", "7", "7")) == {"all"}


async def test_a_chats_filter_narrows_the_offer() -> None:
    registry = default_registry()
    async with catalog(ServerSpec(name="fake", url=MEMORY)) as cat:
        registry.add_source(cat)
        scope = ToolScope("console", "me", "me", is_admin=True, tools=ToolFilter(include=("mcp_fake_add",)))
        offered = registry.offer(scope).names
    assert "mcp_fake_add" in offered and "mcp_fake_echo" not in offered
    assert "memory" in offered  # our own tools are not the filter's to narrow


async def test_a_sessions_offer_is_frozen_until_its_next_compaction() -> None:
    registry = default_registry()
    state = ContextState()
    async with catalog(ServerSpec(name="fake", url=MEMORY)) as cat:
        registry.add_source(cat)
        first = registry.offer(ADMIN_SCOPE, state)
        connection = cat.connections[0]
        await connection.call("grow", {})
        connection.refresh()
        while "extra" not in [t.name for t in connection.listed]:
            await connection.call("echo", {"text": "tick"})
        assert "mcp_fake_extra" in registry.offer(ADMIN_SCOPE).names  # the catalog moved on
        assert registry.offer(ADMIN_SCOPE, state).definitions() == first.definitions()
        state.compaction_count += 1
        after = registry.offer(ADMIN_SCOPE, state)
    assert "mcp_fake_extra" not in first.names
    assert "mcp_fake_extra" in after.names


async def test_each_call_is_reported_with_its_server_tool_duration_and_error() -> None:
    records: list[ToolCallRecord] = []

    async def observe(record: ToolCallRecord) -> None:
        records.append(record)

    async with catalog(ServerSpec(name="fake", url=MEMORY), observer=observe) as cat:
        tools = {t.name: t for t in cat.tools_for(ADMIN_SCOPE)}
        ctx = ToolContext(make_session(), InMemoryStore(), "scope")
        await tools["mcp_fake_echo"].run(ctx, {"text": "hi"})
        await tools["mcp_fake_add"].run(ctx, {"a": "x", "b": 1})
    assert [(r.server, r.tool) for r in records] == [("fake", "echo"), ("fake", "add")]
    assert records[0].error is None and records[0].duration_ms >= 0
    assert records[1].error is not None
