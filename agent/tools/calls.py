"""What an MCP tool call leaves behind for the operator, in a module that does not import the MCP SDK:
the store and the admin page read these records, and commands such as ``hygieia sessions`` should
not pay for loading the SDK (about a second of CPU per process)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One MCP tool call, as the operator sees it (admin page, metrics)."""

    session_id: str
    server: str
    tool: str
    started_at: datetime
    duration_ms: float
    error: str | None
    output_chars: int


ToolCallObserver = Callable[[ToolCallRecord], Awaitable[None]]
