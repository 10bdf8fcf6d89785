"""Reminders and recurring tasks (``scheduled_tasks``), and firing them into the inbox.

A run of a task is a synthetic inbox item (``platform_message_id`` ``task:<id>:<run>``) for
the task's own chat, committed in the same transaction that advances the task: the durable
inbox then serves it like any message, exactly once, across restarts and workers.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

from gateway.store.base import CONFLICT_RETRIES, Repo
from gateway.store.columns import clean_json, clean_text, rows_changed
from gateway.store.lease_ops import serialize
from gateway.store.models import inbox, scheduled_tasks
from gateway.wire import InboxPayload

TaskKind = Literal["at", "cron", "every"]
TaskStatus = Literal["active", "done", "cancelled"]
RUN_PREFIX = "task:"


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One row of ``scheduled_tasks``."""

    id: str
    session_key: str
    platform: str
    chat_id: str
    thread_id: str | None
    session_id: str | None
    prompt: str
    kind: TaskKind
    spec: str
    timezone: str
    status: TaskStatus
    next_run_at: datetime | None
    last_run_at: datetime | None
    runs: int
    created_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True, slots=True)
class NewTask:
    """What creating a task stores; the chat fields come from the creating session, never the model."""

    session_key: str
    platform: str
    chat_id: str
    thread_id: str | None
    session_id: str | None
    prompt: str
    kind: TaskKind
    spec: str
    timezone: str
    next_run_at: datetime


def run_message_id(task_id: str, run: int) -> str:
    """The inbox idempotency key of a task's ``run``-th run."""
    return f"{RUN_PREFIX}{task_id}:{run}"


def _record(row: Any) -> TaskRecord:
    data = dict(row)
    data["kind"] = cast(TaskKind, data["kind"])
    data["status"] = cast(TaskStatus, data["status"])
    data["runs"] = int(data["runs"])
    return TaskRecord(**data)


class TaskOps(Repo):
    async def task_create(self, task: NewTask, *, now: datetime, max_active: int) -> TaskRecord | None:
        """Store ``task`` (active); ``None`` when its chat already has ``max_active`` active tasks."""
        for _ in range(CONFLICT_RETRIES):
            values = {
                "id": secrets.token_hex(4),
                "session_key": task.session_key,
                "platform": task.platform,
                "chat_id": task.chat_id,
                "thread_id": task.thread_id,
                "session_id": task.session_id,
                "prompt": clean_text(task.prompt),
                "kind": task.kind,
                "spec": task.spec,
                "timezone": task.timezone,
                "status": "active",
                "next_run_at": task.next_run_at,
                "last_run_at": None,
                "runs": 0,
                "created_at": now,
                "ended_at": None,
            }
            try:
                async with self._tx() as s:
                    # The limit check and the insert are one step per chat, across workers too.
                    await serialize(s, self.db.dialect, f"tasks:{task.session_key}")
                    active = await s.scalar(
                        select(func.count()).where(
                            scheduled_tasks.c.session_key == task.session_key,
                            scheduled_tasks.c.status == "active",
                        )
                    )
                    if int(active or 0) >= max_active:
                        return None
                    await s.execute(insert(scheduled_tasks).values(**values))
                    return _record(values)
            except IntegrityError:
                continue  # an id collision: draw another
        raise RuntimeError("could not draw a free task id")

    async def task_list(
        self,
        *,
        status: TaskStatus | None = "active",
        session_key: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[TaskRecord]:
        """Tasks, soonest next run first (finished ones last, newest first)."""
        stmt = select(scheduled_tasks)
        if status is not None:
            stmt = stmt.where(scheduled_tasks.c.status == status)
        if session_key is not None:
            stmt = stmt.where(scheduled_tasks.c.session_key == session_key)
        stmt = stmt.order_by(
            scheduled_tasks.c.next_run_at.is_(None),
            scheduled_tasks.c.next_run_at,
            scheduled_tasks.c.created_at.desc(),
            scheduled_tasks.c.id,
        )
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt.limit(limit).offset(offset))).mappings()
            return [_record(r) for r in rows]

    async def task_get(self, task_id: str) -> TaskRecord | None:
        async with self._tx(write=False) as s:
            row = (
                (await s.execute(select(scheduled_tasks).where(scheduled_tasks.c.id == task_id)))
                .mappings()
                .first()
            )
            return None if row is None else _record(row)

    async def task_cancel(self, session_key: str, task_id: str, *, now: datetime) -> TaskRecord | None:
        """Cancel the chat's active task ``task_id``; ``None`` when the chat has no such active task."""
        where = (
            scheduled_tasks.c.id == task_id,
            scheduled_tasks.c.session_key == session_key,
            scheduled_tasks.c.status == "active",
        )
        async with self._tx() as s:
            result = await s.execute(
                update(scheduled_tasks)
                .where(*where)
                .values(status="cancelled", ended_at=now, next_run_at=None)
            )
            if not rows_changed(result):
                return None
            row = (
                (await s.execute(select(scheduled_tasks).where(scheduled_tasks.c.id == task_id)))
                .mappings()
                .one()
            )
            return _record(row)

    async def task_due(self, now: datetime, *, limit: int = 100) -> list[TaskRecord]:
        """Active tasks whose next run is due, the most overdue first."""
        stmt = (
            select(scheduled_tasks)
            .where(scheduled_tasks.c.status == "active", scheduled_tasks.c.next_run_at <= now)
            .order_by(scheduled_tasks.c.next_run_at, scheduled_tasks.c.id)
            .limit(limit)
        )
        async with self._tx(write=False) as s:
            return [_record(r) for r in (await s.execute(stmt)).mappings()]

    async def task_fire(
        self, task: TaskRecord, *, now: datetime, next_run_at: datetime | None, payload: InboxPayload
    ) -> int | None:
        """Queue ``task``'s next run in its chat's inbox and advance the task, in one transaction.

        Returns the inbox id, or ``None`` when the run was already queued (another firing won)
        or the task changed meanwhile (cancelled). A task with no ``next_run_at`` is done.
        """
        run = task.runs + 1
        async with self._tx() as s:
            advanced = await s.execute(
                update(scheduled_tasks)
                .where(
                    scheduled_tasks.c.id == task.id,
                    scheduled_tasks.c.status == "active",
                    scheduled_tasks.c.runs == task.runs,
                )
                .values(
                    runs=run,
                    last_run_at=now,
                    next_run_at=next_run_at,
                    status="active" if next_run_at is not None else "done",
                    ended_at=None if next_run_at is not None else now,
                )
            )
            if not rows_changed(advanced):
                return None
            message_id = run_message_id(task.id, run)
            exists = await s.scalar(
                select(inbox.c.id).where(
                    inbox.c.platform == task.platform,
                    inbox.c.chat_id == task.chat_id,
                    inbox.c.platform_message_id == message_id,
                )
            )
            if exists is not None:
                return None
            inbox_id = await s.scalar(
                insert(inbox)
                .values(
                    platform=task.platform,
                    chat_id=task.chat_id,
                    platform_message_id=message_id,
                    session_key=task.session_key,
                    payload=clean_json(payload),
                    addressed=True,
                    status="pending",
                    attempts=0,
                    received_at=now,
                )
                .returning(inbox.c.id)
            )
            return int(inbox_id or 0)

    async def task_counts(self) -> dict[str, int]:
        """How many tasks there are, by status."""
        stmt = select(scheduled_tasks.c.status, func.count()).group_by(scheduled_tasks.c.status)
        async with self._tx(write=False) as s:
            return {str(status): int(n) for status, n in (await s.execute(stmt)).all()}
