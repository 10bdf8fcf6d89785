"""Tools the agent can call, and the registry deployers add their own to."""

from __future__ import annotations

from agent.tools.base import FunctionTool, ResumePoint, Tool, ToolContext, ToolOutput, snapshot_line
from agent.tools.memory import MemoryTool
from agent.tools.output import cap_output, tool_result_block
from agent.tools.recall import RecallTool
from agent.tools.registry import ToolRegistry
from agent.tools.schedule import ScheduleTool
from agent.tools.session_search import SessionSearchTool

__all__ = [
    "FunctionTool",
    "MemoryTool",
    "RecallTool",
    "ResumePoint",
    "ScheduleTool",
    "SessionSearchTool",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "cap_output",
    "default_registry",
    "snapshot_line",
    "tool_result_block",
]


def default_registry() -> ToolRegistry:
    """A registry with the built-in tools: session_search, recall and memory.

    ``schedule`` needs the gateway's task store, so the runner registers it (:class:`ScheduleTool`).
    """
    return ToolRegistry([SessionSearchTool(), RecallTool(), MemoryTool()])
