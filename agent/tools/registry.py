"""The tool registry: what the model is offered, and dispatch by name with input checks."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from agent.errors import ConfigError, ToolError
from agent.tools.base import JSONObject, Tool, ToolContext, ToolOutput
from agent.tools.schema import validate_input

_log = logging.getLogger(__name__)


class ToolRegistry:
    """Tools by name. Deployers add their own with :meth:`register`."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._wire: str | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if not tool.name or not tool.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"tool name {tool.name!r}: use letters, digits, '_' or '-'")
        if tool.name in self._tools:
            raise ConfigError(f"tool {tool.name!r} is already registered")
        if tool.input_schema.get("type") != "object":
            raise ConfigError(f"tool {tool.name!r}: input_schema must be a JSON object schema")
        self._tools[tool.name] = tool
        self._wire = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def definitions(self) -> list[JSONObject]:
        """Wire definitions sorted by name: the order never depends on registration order,
        so the cached prompt prefix (tools come first) stays byte-identical. Each call gets its
        own copy; the definitions are read once per registration (a tool's wire form is fixed),
        and copied by parsing their JSON, which costs a few microseconds where a deep copy of
        the schemas cost a quarter of a millisecond on every turn."""
        if self._wire is None:
            self._wire = json.dumps([self._tools[name].definition() for name in self.names])
        definitions: list[JSONObject] = json.loads(self._wire)
        return definitions

    async def dispatch(self, ctx: ToolContext, name: str, tool_input: Any) -> ToolOutput:
        """Run tool ``name``; unknown tools, bad input and :class:`ToolError` become error results.

        Any other exception is a bug in the tool and propagates; the loop turns it into an
        error result, so the turn goes on.
        """
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self.names) or "none"
            return ToolOutput.error(f"unknown tool {name!r}; available tools: {known}")
        problems = validate_input(tool.input_schema, tool_input)
        if problems:
            return ToolOutput.error(f"invalid input for {name}: " + "; ".join(problems))
        try:
            return await tool.run(ctx, dict(tool_input))
        except ToolError as exc:
            _log.info("tool %s refused its input: %s", name, exc, extra={"session": ctx.session.id})
            return ToolOutput.error(str(exc))
