"""What chat commands show of MCP tools: ``/status`` lists the servers and their state, ``/context``
counts the definitions the session is offered (its MCP tools included) and the tool output apart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agent.tools.mcp_servers import McpCatalog, ServerSpec
from gateway.store.repository import Store
from tests.fakes.anthropic import tool_use_reply
from tests.fakes.mcp_tools import free_port, tools_server
from tests.gateway.conftest import Rig, gateway_rig

ADMIN = "test:u1"


@asynccontextmanager
async def rig_with_servers(store: Store, **settings: object) -> AsyncIterator[Rig]:
    specs = [
        ServerSpec(name="fake", url="memory"),
        ServerSpec(name="gone", url=f"http://127.0.0.1:{free_port()}/mcp", connect_timeout_seconds=2),
    ]
    async with (
        McpCatalog(specs, targets={"fake": tools_server()}) as catalog,
        gateway_rig(store, tool_servers=catalog, **settings) as rig,
    ):
        yield rig


def bar(text: str, name: str) -> int:
    line = next(line for line in text.splitlines() if line.startswith(name))
    return int(line.split()[-2].replace(",", ""))


async def test_status_lists_each_server_and_its_state(store: Store) -> None:
    async with rig_with_servers(store) as rig:
        await rig.say("/status")
        await rig.settle()
    status = rig.adapter.texts[-1]
    assert "MCP server fake: up since" in status and ", 11 tools" in status
    assert "MCP server gone: down since" in status and " because " in status


async def test_context_counts_the_mcp_definitions_an_admin_is_offered(store: Store) -> None:
    async with rig_with_servers(store, admin_users=[ADMIN]) as rig:
        await rig.say("/context")
        await rig.settle()
        admin = bar(rig.adapter.texts[-1], "tools")
        await rig.say("/context", user_id="u2", chat_id="chat-2")
        await rig.settle()
        other = bar(rig.adapter.texts[-1], "tools")
    assert admin > other > 0


async def test_context_shows_tool_output_apart_from_history(store: Store) -> None:
    async with rig_with_servers(store, admin_users=[ADMIN]) as rig:
        calls = [tool_use_reply("mcp_fake_big", {"size": 4000})]
        rig.responder.override = lambda body: calls.pop() if calls else None
        await rig.say("read the big one")
        await rig.settle()
        await rig.say("/context")
        await rig.settle()
        output = bar(rig.adapter.texts[-1], "tool out")
    assert output >= 500
