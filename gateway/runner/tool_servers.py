"""The MCP servers of ``mcp_servers:`` as the agent's catalog: specs resolved from the config and
the environment (``${NAME}``), and each call recorded (the store, the metrics).

The MCP SDK (about a second of CPU to import) is loaded only when a server is configured: most
deployments have none, and every ``hygieia run`` would pay for it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agent.errors import ConfigError
from agent.tools.calls import ToolCallObserver
from agent.tools.scope import ToolFilter
from gateway.config import McpServerSettings, Settings
from gateway.config.sources import resolve_references

if TYPE_CHECKING:
    from agent.tools.mcp_servers import McpCatalog, ServerSpec

_log = logging.getLogger(__name__)


def server_spec(name: str, config: McpServerSettings, environ: Mapping[str, str]) -> ServerSpec:
    """One server as the agent takes it; a ``${NAME}`` that is not set leaves it down, saying so."""
    from agent.tools.mcp_servers import ServerSpec  # the SDK only when configured

    unusable = ""
    env: dict[str, str] = {}
    headers: dict[str, str] = {}
    try:
        for key, value in config.env.items():
            env[key] = resolve_references(value, environ, f"mcp_servers.{name}.env.{key}")
        for key, value in config.headers.items():
            headers[key] = resolve_references(value, environ, f"mcp_servers.{name}.headers.{key}")
    except ConfigError as exc:
        unusable = str(exc)
        _log.error("MCP server %s cannot start: %s", name, exc)
    return ServerSpec(
        name=name,
        command=config.command,
        args=tuple(config.args),
        env=env,
        cwd=config.cwd,
        url=config.url,
        headers=headers,
        timeout_seconds=config.timeout_seconds,
        connect_timeout_seconds=config.connect_timeout_seconds,
        tools=ToolFilter(tuple(config.tools.include), tuple(config.tools.exclude)),
        allow=tuple(config.allow),
        unusable=unusable,
    )


def server_specs(settings: Settings, environ: Mapping[str, str]) -> list[ServerSpec]:
    """The enabled servers, in config order."""
    return [server_spec(n, c, environ) for n, c in settings.mcp_servers.items() if c.enabled]


def build_catalog(
    settings: Settings, environ: Mapping[str, str], observer: ToolCallObserver | None = None
) -> McpCatalog | None:
    """The catalog of the enabled servers (None without any: nothing to start)."""
    specs = server_specs(settings, environ)
    if not specs:
        return None
    from agent.tools.mcp_servers import McpCatalog  # the SDK only when configured

    return McpCatalog(specs, observer=observer)


async def probe_servers(settings: Settings, environ: Mapping[str, str]) -> list[tuple[str, bool, str]]:
    """Connect to every enabled server once (``hygieia doctor``): (name, up, its tools or why not)."""
    catalog = build_catalog(settings, environ)
    if catalog is None:
        return []
    found: list[tuple[str, bool, str]] = []
    async with catalog:
        for connection in catalog.connections:
            state = connection.state
            if state.status != "up":
                found.append((connection.name, False, state.describe()))
                continue
            names = ", ".join(t.name for t in catalog.server_tools(connection)) or "none offered"
            found.append((connection.name, True, f"{len(catalog.server_tools(connection))} tools: {names}"))
    return found
