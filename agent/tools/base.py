"""What a tool is: a name, a description, an input schema and an async ``run``.

Tools never raise to refuse their input: they raise :class:`agent.errors.ToolError`
(the registry turns it into an ``is_error`` result the model reads) or return a
:class:`ToolOutput` with ``is_error=True``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from agent.clock import Clock, utcnow
from agent.storage import ConversationStore
from agent.types import AgentSession, ContentBlock

JSONObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may reach: the conversation it serves, the store, its memory scope, a clock."""

    session: AgentSession
    store: ConversationStore
    memory_scope: str
    clock: Clock = utcnow
    tool_use_id: str = ""
    turn_start_id: int | None = None
    """Id of the first message of the running turn (its question): what a search leaves out."""
    offered: Mapping[str, Tool] | None = None
    """The tools the running turn was offered, per-chat ones (MCP servers) included: a sub-agent gets
    the same."""


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """A place in a tool's output text from which ``input`` (a call of the same tool) continues.

    When the loop must cut a long output it cuts at the last resume point that fits and
    tells the model the exact call that returns the rest.
    """

    at: int
    input: JSONObject


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """The text a tool returns to the model, and where a truncated output can resume."""

    text: str
    is_error: bool = False
    resume_points: tuple[ResumePoint, ...] = field(default_factory=tuple)
    media: tuple[ContentBlock, ...] = ()
    """Image or document blocks returned with the text (``recall`` of an archived picture)."""
    cited: tuple[ContentBlock, ...] = ()
    """``search_result`` blocks, one per resume point: the item of ``text`` that starts there.
    Sent in place of those items; the text before the first and after ``cited_end`` stays text."""
    cited_end: int = 0

    @classmethod
    def error(cls, text: str) -> ToolOutput:
        return cls(text=text, is_error=True)


class Tool(ABC):
    """A tool the model can call. Subclasses set the three class attributes and ``run``."""

    name: str
    description: str
    input_schema: JSONObject

    @abstractmethod
    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        """Do the work; ``tool_input`` has already been checked against ``input_schema``."""

    def definition(self) -> JSONObject:
        """The tool as the Messages API takes it."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


ToolFunction = Callable[[ToolContext, JSONObject], Awaitable[ToolOutput | str]]


class FunctionTool(Tool):
    """A tool made from an async function, for deployers who do not want a class."""

    def __init__(self, name: str, description: str, input_schema: JSONObject, func: ToolFunction) -> None:
        self.name = name
        self.description = description
        self.input_schema = input_schema
        self._func = func

    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        result = await self._func(ctx, tool_input)
        return ToolOutput(text=result) if isinstance(result, str) else result


def snapshot_line(clock: Clock) -> str:
    """First line of point-in-time outputs, so the model does not treat them as live."""
    return f"snapshot at {clock().astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC, will not update"
