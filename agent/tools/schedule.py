"""``schedule``: reminders and recurring tasks that run later in this chat.

``{"action": "create", "prompt": str, "at": ISO-8601}`` (one-shot; a time without an offset
is in the chat's time zone), or ``"cron": "30 8 * * 1-5"`` / ``"every_seconds": int`` instead
of ``at`` (recurring), optional ``"timezone"``; ``{"action": "list"}``; ``{"action": "cancel",
"id": str}``. At its time a task runs a turn in this chat with ``prompt`` as the message.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from agent.tasks import TaskRejected, TaskRequest, TaskStore, TaskView
from agent.tools.base import JSONObject, Tool, ToolContext, ToolOutput, snapshot_line

SCHEDULE_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["create", "list", "cancel"]},
        "prompt": {
            "type": "string",
            "description": "create: what to do when the task runs, written as an instruction to yourself "
            "(for example 'Remind the user to call the bank').",
        },
        "at": {
            "type": "string",
            "description": "create, one-shot: ISO-8601 date-time, e.g. 2026-12-01T09:00 (the chat's time "
            "zone) or 2026-12-01T09:00+01:00.",
        },
        "cron": {
            "type": "string",
            "description": "create, recurring: 5-field crontab 'minute hour day month weekday' "
            "(weekday 0 or 7 = Sunday), e.g. '30 8 * * 1-5' for weekdays at 08:30.",
        },
        "every_seconds": {"type": "integer", "description": "create, recurring: the interval in seconds."},
        "timezone": {
            "type": "string",
            "description": "IANA zone for at/cron, e.g. Europe/Berlin; default: this chat's.",
        },
        "id": {"type": "string", "description": "cancel: the task's id (from create or list)."},
    },
    "required": ["action"],
}


def task_line(task: TaskView) -> str:
    """``a1b2c3d4: every weekday ..., next Tue 2026-12-01 08:30 (Europe/Berlin), 3 runs: <prompt>``."""
    parts = [f"{task.id}: {task.schedule}"]
    if task.next_run_at is not None:
        parts.append(f"next {local(task.next_run_at, task.timezone)}")
    if task.runs:
        parts.append(f"{task.runs} run{'s' if task.runs != 1 else ''} so far")
    return ", ".join(parts) + f": {' '.join(task.prompt.split())[:200]}"


def local(moment: datetime, zone: str) -> str:
    return f"{moment.astimezone(ZoneInfo(zone)):%a %Y-%m-%d %H:%M} ({zone})"


class ScheduleTool(Tool):
    name = "schedule"
    description = (
        "Set a reminder or a recurring task in this chat, list this chat's tasks, or cancel one. At its "
        "time a task runs a new turn here with its prompt as the message, marked as scheduled; your "
        "answer then is sent to this chat. create needs prompt and exactly one of at (one-shot), cron or "
        "every_seconds (recurring). Times without an offset are in this chat's time zone."
    )
    input_schema = SCHEDULE_SCHEMA

    def __init__(self, tasks: TaskStore) -> None:
        self._tasks = tasks

    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        action = tool_input["action"]
        if action == "create":
            task = await self._tasks.create_task(ctx.session, _request(tool_input))
            return ToolOutput(
                f"Scheduled task {task.id}: {task.schedule}, first run "
                f"{local(task.next_run_at, task.timezone) if task.next_run_at else 'never'}. "
                f"Cancel it with action cancel and id {task.id} (the user can send /cancel {task.id})."
            )
        if action == "list":
            tasks = await self._tasks.list_tasks(ctx.session)
            lines = [snapshot_line(ctx.clock)]
            if not tasks:
                lines.append("No active tasks in this chat.")
            else:
                lines.append(f"{len(tasks)} active task(s) in this chat, soonest first:")
                lines.extend(f"- {task_line(t)}" for t in tasks)
            return ToolOutput("\n".join(lines))
        task_id = str(tool_input.get("id") or "").strip()
        if not task_id:
            raise TaskRejected("cancel needs the id of the task (see action list)")
        task = await self._tasks.cancel_task(ctx.session, task_id)
        return ToolOutput(f"Cancelled task {task.id} ({task.schedule}).")


def _request(tool_input: JSONObject) -> TaskRequest:
    prompt = str(tool_input.get("prompt") or "").strip()
    if not prompt:
        raise TaskRejected("create needs a prompt: what to do when the task runs")
    when = [key for key in ("at", "cron", "every_seconds") if tool_input.get(key) is not None]
    if len(when) != 1:
        given = f" (got {', '.join(when)})" if when else ""
        raise TaskRejected(
            "create needs exactly one of at (ISO-8601 date-time, one-shot), cron (5-field crontab) "
            f"or every_seconds (recurring){given}"
        )
    zone = tool_input.get("timezone")
    every = tool_input.get("every_seconds")
    return TaskRequest(
        prompt=prompt,
        at=None if tool_input.get("at") is None else str(tool_input["at"]),
        cron=None if tool_input.get("cron") is None else str(tool_input["cron"]),
        every_seconds=None if every is None else int(every),
        timezone=None if zone is None else str(zone),
    )
