"""MCP servers as tools: the server specs, one connection per server, and the catalog of their tools."""

from __future__ import annotations

from agent.tools.calls import ToolCallObserver, ToolCallRecord
from agent.tools.mcp_servers.catalog import McpCatalog, McpTool
from agent.tools.mcp_servers.connection import ServerConnection, ServerState, child_environment
from agent.tools.mcp_servers.spec import ServerSpec, wire_name

__all__ = [
    "McpCatalog",
    "McpTool",
    "ServerConnection",
    "ServerSpec",
    "ServerState",
    "ToolCallObserver",
    "ToolCallRecord",
    "child_environment",
    "wire_name",
]
