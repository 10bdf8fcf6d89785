"""A chat's override narrows the MCP tools it is offered: an ``overrides:`` entry of the config or
one an admin set (the admin API), frozen into the session like every override."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from agent.tools.mcp_servers import McpCatalog, ServerSpec
from gateway.config import ChatOverride
from gateway.store.repository import Store
from tests.fakes.mcp_tools import tools_server
from tests.gateway.admin_support import admin_client
from tests.gateway.conftest import Rig, gateway_rig

ADMIN = "test:u1"


@asynccontextmanager
async def rig_with_server(store: Store, **settings: Any) -> AsyncIterator[Rig]:
    spec = ServerSpec(name="fake", url="memory")
    async with (
        McpCatalog([spec], targets={"fake": tools_server()}) as catalog,
        gateway_rig(store, tool_servers=catalog, admin_users=[ADMIN], **settings) as rig,
    ):
        yield rig


def offered(rig: Rig) -> list[str]:
    return [t["name"] for t in rig.responder.chat_bodies[-1]["tools"]]


async def test_without_an_override_an_admin_is_offered_every_tool_of_the_server(store: Store) -> None:
    async with rig_with_server(store) as rig:
        await rig.say("hello")
        await rig.settle()
    assert {"mcp_fake_add", "mcp_fake_echo", "memory"} <= set(offered(rig))


async def test_a_config_override_narrows_the_chats_mcp_tools(store: Store) -> None:
    entry = ChatOverride(platform="test", chat="chat-1", tools={"include": ["mcp_fake_a*"]})  # type: ignore[arg-type]
    async with rig_with_server(store, overrides=[entry]) as rig:
        await rig.say("hello")
        await rig.settle()
        await rig.say("/status")
        await rig.settle()
    names = offered(rig)
    assert "mcp_fake_add" in names and "mcp_fake_echo" not in names
    assert "memory" in names
    assert "MCP tools include mcp_fake_a*" in rig.adapter.texts[-1]


async def test_an_admin_set_override_narrows_the_chats_mcp_tools(store: Store) -> None:
    body = {"platform": "test", "chat": "chat-1", "tools": {"exclude": ["mcp_fake_e*"]}, "by": "ops"}
    async with admin_client(store) as client:
        response = await client.post("/api/overrides", json=body)
        assert response.status_code == 200, response.text
        listed = (await client.get("/api/overrides")).json()
        page = (await client.get("/overrides")).text
    assert listed["admin"][0]["tools"] == {"include": [], "exclude": ["mcp_fake_e*"]}
    assert "exclude mcp_fake_e*" in page
    async with rig_with_server(store) as rig:
        await rig.say("hello")
        await rig.settle()
    names = offered(rig)
    assert "mcp_fake_add" in names
    assert not any(n.startswith("mcp_fake_e") for n in names)


async def test_an_admin_override_with_a_bad_tools_value_is_refused_in_one_line(store: Store) -> None:
    body = {"platform": "test", "chat": "chat-1", "tools": {"include": "x" * 200}, "by": "ops"}
    async with admin_client(store) as client:
        response = await client.post("/api/overrides", json=body)
    assert response.status_code in (400, 422)
