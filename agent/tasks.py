"""Reminders and recurring tasks, as the agent sees them: the request, the stored view, and the
protocol through which the ``schedule`` tool reaches them (the gateway implements it).

A task belongs to the chat of the session that created it; the protocol takes the session,
never a chat, so a task can only ever be created, listed or cancelled for the caller's own chat.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from agent.errors import ToolError
from agent.types import AgentSession

TaskStatus = Literal["active", "done", "cancelled"]


class TaskRejected(ToolError):
    """The request cannot be scheduled (past time, bad cron, unknown zone, limit ...); the
    message says why, in one line the model can act on."""


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """A task to create: ``prompt`` runs at ``at`` (one-shot), or on ``cron`` / ``every_seconds``."""

    prompt: str
    at: str | None = None
    cron: str | None = None
    every_seconds: int | None = None
    timezone: str | None = None


@dataclass(frozen=True, slots=True)
class TaskView:
    """A stored task: ``schedule`` says when in words; times are aware UTC, shown in ``timezone``."""

    id: str
    prompt: str
    schedule: str
    timezone: str
    status: TaskStatus
    next_run_at: datetime | None
    runs: int
    created_at: datetime


class TaskStore(Protocol):
    """The tasks of the caller's chat. Each method raises :class:`TaskRejected` to refuse."""

    async def create_task(self, session: AgentSession, request: TaskRequest) -> TaskView:
        """Check and store a new task for the chat ``session`` belongs to."""
        ...

    async def list_tasks(self, session: AgentSession) -> list[TaskView]:
        """The chat's active tasks, soonest first."""
        ...

    async def cancel_task(self, session: AgentSession, task_id: str) -> TaskView:
        """Cancel one of the chat's active tasks (another chat's task is "not found")."""
        ...
