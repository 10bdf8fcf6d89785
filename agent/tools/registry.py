"""The tool registry: what the model is offered, and dispatch by name with input checks.

Built-in and deployer tools are registered once; a :class:`ToolSource` (the MCP catalog) adds
tools per chat. What one session is offered is a :class:`ToolOffer`, frozen for the session
until its next compaction, so the cached prefix (tools come first) holds.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from agent.errors import ConfigError, ToolError
from agent.tools.base import JSONObject, Tool, ToolContext, ToolOutput
from agent.tools.deferral import ToolDeferral, apply_deferral, deferred_names
from agent.tools.schema import validate_input
from agent.tools.scope import ADMIN_SCOPE, ToolScope
from agent.types import ContextState

_log = logging.getLogger(__name__)

OFFER_KEY = "tool_offer"
"""Where a session's frozen offer is named in its context state: its digest and the compaction count."""
KEPT_OFFERS = 256
DEFAULT_DEFERRAL = ToolDeferral()


class ToolSource(Protocol):
    """Tools that depend on who a turn serves (the MCP catalog is one)."""

    def tools_for(self, scope: ToolScope) -> Sequence[Tool]: ...


class ToolOffer:
    """The tools one request carries: their wire definitions (sorted by name, then the tool
    search tool when some are deferred) and dispatch."""

    def __init__(self, tools: Mapping[str, Tool], wire: str) -> None:
        self.tools = dict(tools)
        self._wire = wire
        self.digest = hashlib.sha256(wire.encode()).hexdigest()[:16]
        self.deferred = frozenset(deferred_names(json.loads(wire)))

    @classmethod
    def of(
        cls, tools: Iterable[Tool], *, deferrable: Iterable[str] = (), deferral: ToolDeferral | None = None
    ) -> ToolOffer:
        """The offer of ``tools``; past ``deferral``'s threshold the ``deferrable`` ones are deferred."""
        by_name = {t.name: t for t in tools}
        definitions = [by_name[n].definition() for n in sorted(by_name)]
        return cls(by_name, json.dumps(apply_deferral(definitions, deferrable, deferral)))

    @property
    def names(self) -> list[str]:
        return sorted(self.tools)

    def definitions(self) -> list[JSONObject]:
        """A fresh copy of the wire definitions (parsed from JSON: microseconds, where a deep
        copy of the schemas cost a quarter of a millisecond on every turn)."""
        definitions: list[JSONObject] = json.loads(self._wire)
        return definitions

    async def dispatch(self, ctx: ToolContext, name: str, tool_input: Any) -> ToolOutput:
        """Run tool ``name``; unknown tools, bad input and :class:`ToolError` become error results.

        Any other exception is a bug in the tool and propagates; the loop turns it into an
        error result, so the turn goes on.
        """
        tool = self.tools.get(name)
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


class ToolRegistry:
    """Tools by name: deployers add their own with :meth:`register`, per-chat ones with :meth:`add_source`."""

    def __init__(
        self, tools: Iterable[Tool] = (), *, deferral: ToolDeferral | None = DEFAULT_DEFERRAL
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self.deferral = deferral
        """When per-chat tools are deferred behind the tool search tool (None: never)."""
        self._own: ToolOffer | None = None
        self._sources: list[ToolSource] = []
        self._offers: OrderedDict[str, ToolOffer] = OrderedDict()
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
        self._own = None

    def add_source(self, source: ToolSource) -> None:
        """Tools offered per chat, beside the registered ones (which win a name clash)."""
        self._sources.append(source)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def own(self) -> ToolOffer:
        """The registered tools alone (read once per registration: a tool's wire form is fixed)."""
        if self._own is None:
            self._own = ToolOffer.of(self._tools.values())
        return self._own

    def definitions(self) -> list[JSONObject]:
        """Wire definitions of the registered tools, sorted by name: the order never depends on
        registration order, so the cached prompt prefix stays byte-identical."""
        return self.own().definitions()

    def offer(self, scope: ToolScope | None = None, state: ContextState | None = None) -> ToolOffer:
        """What a turn for ``scope`` is offered. With ``state``, the offer is frozen: the one the
        session was first given stays until its next compaction (a changed catalog applies then,
        or in the next session), as long as this process still holds it."""
        own = self.own()
        if not self._sources:
            return own
        current = self._current(scope or ADMIN_SCOPE, own)
        if state is None:
            return current
        frozen = state.extra.get(OFFER_KEY)
        if isinstance(frozen, dict) and frozen.get("compactions") == state.compaction_count:
            kept = self._offers.get(str(frozen.get("digest")))
            if kept is not None:
                self._offers.move_to_end(kept.digest)
                return kept
        self._offers[current.digest] = current
        self._offers.move_to_end(current.digest)
        while len(self._offers) > KEPT_OFFERS:
            self._offers.popitem(last=False)
        state.extra[OFFER_KEY] = {"digest": current.digest, "compactions": state.compaction_count}
        return current

    async def dispatch(self, ctx: ToolContext, name: str, tool_input: Any) -> ToolOutput:
        """Run a registered tool by name (see :meth:`ToolOffer.dispatch`)."""
        return await self.own().dispatch(ctx, name, tool_input)

    def _current(self, scope: ToolScope, own: ToolOffer) -> ToolOffer:
        tools: dict[str, Tool] = {}
        for source in self._sources:
            for tool in source.tools_for(scope):
                if tool.name in self._tools or tool.name in tools or not scope.tools.keeps(tool.name):
                    continue
                tools[tool.name] = tool
        if not tools:
            return own
        # Only tools of a source may be deferred: the registered ones always stay loaded.
        deferrable = list(tools)
        tools.update(own.tools)
        return ToolOffer.of(tools.values(), deferrable=deferrable, deferral=self.deferral)
