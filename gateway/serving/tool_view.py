"""The agent's tools as chat commands show them, and who a turn's tools are chosen for.

``/context`` counts the tokens of the definitions the session is actually offered (its frozen
offer: built-in tools plus the MCP tools its author and chat may use); ``/status`` lists the MCP
servers and their state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agent.tools import ToolRegistry
from agent.tools.deferral import definitions_tokens
from agent.tools.scope import ToolScope
from agent.types import ContextState
from gateway.platforms.base import OutboundTarget
from gateway.serving.auth import Authorizer
from gateway.serving.overrides import frozen_tool_filter
from gateway.store.records import SessionInfo

if TYPE_CHECKING:
    from agent.tools.mcp_servers import McpCatalog


def tool_scope(auth: Authorizer, user_id: str | None, target: OutboundTarget, info: SessionInfo) -> ToolScope:
    """Who a turn serves (its last message's author, in this chat): which MCP tools it is offered,
    narrowed by the overrides its session started with."""
    user = user_id or ""
    return ToolScope(
        platform=target.platform,
        user_id=user,
        chat_id=target.chat_id,
        is_admin=auth.is_admin(target.platform, user),
        tools=frozen_tool_filter(info.chat_overrides),
    )


class ToolView:
    """Read-only looks at the registry and the MCP catalog, for chat commands."""

    def __init__(self, registry: ToolRegistry, catalog: McpCatalog | None = None) -> None:
        self._registry = registry
        self._catalog = catalog

    def definition_tokens(self, scope: ToolScope, state: ContextState) -> int:
        """Tokens of the definitions this session's requests carry (its frozen offer; nothing saved)."""
        look = replace(state, extra=dict(state.extra))
        # Deferred definitions are not in the prompt until a search loads them.
        return definitions_tokens(self._registry.offer(scope, look).definitions())

    def server_lines(self) -> list[str]:
        if self._catalog is None:
            return []
        return [f"MCP server {name}: {state.describe()}" for name, state in self._catalog.states().items()]
