"""The catalog: every configured server's connection, and its tools as agent tools per chat.

Tools are offered as ``mcp_<server>_<tool>`` with the server's own description and input schema,
kept by the server's ``tools: {include, exclude}`` globs, and only to the chats its ``allow:``
rules name. Each call is reported to an observer (the gateway stores it and counts it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

import mcp_types as types

from agent.clock import Clock, utcnow
from agent.tools.base import JSONObject, Tool, ToolContext, ToolOutput
from agent.tools.calls import ToolCallObserver, ToolCallRecord
from agent.tools.invisible import strip_invisible
from agent.tools.mcp_servers.connection import ServerConnection, ServerState
from agent.tools.mcp_servers.spec import ServerSpec, wire_name
from agent.tools.scope import ToolScope

_log = logging.getLogger(__name__)


class McpTool(Tool):
    """One tool of one server, as the model is offered it."""

    def __init__(self, catalog: McpCatalog, connection: ServerConnection, remote: types.Tool) -> None:
        self.name = wire_name(connection.name, remote.name)
        self.server = connection.name
        self.remote = remote.name
        text = strip_invisible(remote.description or "").strip()
        self.description = text or f"The {remote.name} tool of MCP server {connection.name}."
        self.input_schema: JSONObject = dict(remote.input_schema)
        self._catalog = catalog
        self._connection = connection

    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        started, clock = self._catalog.clock(), time.perf_counter()
        output = await self._connection.call(self.remote, tool_input)
        elapsed = (time.perf_counter() - clock) * 1000
        error = output.text.splitlines()[0][:500] if output.is_error and output.text else None
        record = ToolCallRecord(
            ctx.session.id, self.server, self.remote, started, elapsed, error, len(output.text)
        )
        await self._catalog.observe(record)
        return output


class McpCatalog:
    """The MCP servers of the service. ``start`` opens every enabled connection (concurrently),
    ``stop`` closes them in reverse order; a :class:`agent.tools.ToolRegistry` source."""

    def __init__(
        self,
        specs: Iterable[ServerSpec],
        *,
        observer: ToolCallObserver | None = None,
        clock: Clock = utcnow,
        keepalive_seconds: float = 30.0,
        targets: dict[str, Any] | None = None,
    ) -> None:
        """``targets``: in-process server objects by server name, in place of their transports (tests)."""
        self.specs = {spec.name: spec for spec in specs}
        self.clock = clock
        self._observer = observer
        self._connections = [
            ServerConnection(
                spec,
                on_change=self._changed,
                clock=clock,
                keepalive_seconds=keepalive_seconds,
                target=(targets or {}).get(spec.name),
            )
            for spec in self.specs.values()
        ]
        self._tools: dict[str, tuple[McpTool, ...]] = {}
        self._started = False

    @property
    def connections(self) -> list[ServerConnection]:
        return list(self._connections)

    def states(self) -> dict[str, ServerState]:
        return {c.name: c.state for c in self._connections}

    async def start(self) -> None:
        """Open every connection; a server that fails is left down (and retried), never raised."""
        if self._started:
            raise RuntimeError("the MCP catalog is already started")
        self._started = True
        await asyncio.gather(*(c.start() for c in self._connections))

    async def stop(self) -> None:
        for connection in reversed(self._connections):
            await connection.stop()
        self._started = False

    async def __aenter__(self) -> McpCatalog:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def tools_for(self, scope: ToolScope) -> Sequence[Tool]:
        """The tools of the servers whose ``allow:`` rules admit ``scope``, filtered by their globs."""
        found: list[Tool] = []
        for connection in self._connections:
            if scope.allowed_by(connection.spec.allow):
                found.extend(self.server_tools(connection))
        return found

    def server_tools(self, connection: ServerConnection) -> tuple[McpTool, ...]:
        kept = self._tools.get(connection.name)
        if kept is None:
            kept = self._build(connection)
            self._tools[connection.name] = kept
        return kept

    async def observe(self, record: ToolCallRecord) -> None:
        if self._observer is None:
            return
        try:
            await self._observer(record)
        except Exception as exc:  # the record is bookkeeping: a failure to keep it never fails the call
            _log.warning("a tool call of server %s was not recorded: %s", record.server, exc)

    def _changed(self, connection: ServerConnection) -> None:
        # Built again on next use; sessions keep the offer they were frozen with.
        self._tools.pop(connection.name, None)
        _log.info("MCP server %s lists %d tools", connection.name, len(connection.listed))

    def _build(self, connection: ServerConnection) -> tuple[McpTool, ...]:
        tools: dict[str, McpTool] = {}
        for remote in connection.listed:
            if not connection.spec.tools.keeps(remote.name):
                continue
            if remote.input_schema.get("type") != "object":
                _log.warning(
                    "MCP server %s: tool %s has no object schema, left out", connection.name, remote.name
                )
                continue
            tool = McpTool(self, connection, remote)
            if tool.name in tools:
                _log.warning(
                    "MCP server %s: two tools are both named %s, one left out", connection.name, tool.name
                )
                continue
            tools[tool.name] = tool
        return tuple(tools[name] for name in sorted(tools))
