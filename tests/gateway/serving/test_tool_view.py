"""``/context``'s count of tool definitions: what the session's requests put in the prompt."""

from __future__ import annotations

from agent.tools import default_registry
from agent.tools.deferral import ToolDeferral
from agent.tools.mcp_servers import McpCatalog, ServerSpec
from agent.tools.scope import ADMIN_SCOPE
from agent.types import ContextState
from gateway.serving.tool_view import ToolView
from tests.fakes.mcp_catalog import catalog_server


async def definition_tokens(deferral: ToolDeferral | None) -> int:
    registry = default_registry()
    registry.deferral = deferral
    async with McpCatalog([ServerSpec(name="wide", url="memory")], targets={"wide": catalog_server()}) as cat:
        registry.add_source(cat)
        return ToolView(registry, cat).definition_tokens(ADMIN_SCOPE, ContextState())


async def test_deferred_definitions_are_left_out_of_the_count() -> None:
    loaded = await definition_tokens(None)
    deferred = await definition_tokens(ToolDeferral())
    assert loaded > 10_000
    assert deferred < 1_000
