"""What the agent needs to know of one configured MCP server (the gateway's config maps onto it)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.tools.scope import ToolFilter

TOOL_PREFIX = "mcp_"
_NAME_LIMIT = 64
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server: a stdio child (``command``) or a Streamable HTTP endpoint (``url``).

    ``env`` and ``headers`` hold resolved values (the gateway resolves ``${NAME}`` at start).
    ``allow`` holds selectors (``user:<platform>:<id>``, ``chat:<platform>:<id>``, ``*``); empty
    means admin users only.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = 60.0
    connect_timeout_seconds: float = 30.0
    tools: ToolFilter = field(default_factory=ToolFilter)
    allow: tuple[str, ...] = ()
    unusable: str = ""
    """Why the server cannot be started at all (a ``${NAME}`` that is not set): it stays down."""

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


def wire_name(server: str, tool: str) -> str:
    """``mcp_<server>_<tool>`` within the API's tool-name rule (``^[a-zA-Z0-9_-]{1,64}$``):
    other characters become ``_``; a name past 64 characters keeps its head and a short hash."""
    name = _UNSAFE.sub("_", f"{TOOL_PREFIX}{server}_{tool}")
    if len(name) <= _NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: _NAME_LIMIT - 9]}_{digest}"
