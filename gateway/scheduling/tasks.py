"""Reminders and recurring tasks: the gateway's side of the ``schedule`` tool, and their firing.

:class:`TaskBook` implements :class:`agent.tasks.TaskStore`: it reads the request in the
chat's time zone (the tool's ``timezone``, else ``scheduler.tasks.chat_timezones`` for the
chat, else ``timezone``), refuses what cannot be scheduled with one clear line, and stores
the task for the chat of the session that asked, never another.

:meth:`TaskBook.fire_due` is the ``tasks`` job: each due run becomes a synthetic inbox item
for the task's chat (idempotent per task run), so the gateway serves it like a message — a
turn in that chat with the task's prompt, marked as scheduled, answered through the outbox.
"""

from __future__ import annotations

import itertools
import logging
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from agent.clock import Clock, utcnow
from agent.tasks import TaskRejected, TaskRequest, TaskStore, TaskView
from agent.types import AgentSession
from gateway.config import TaskSettings
from gateway.local_time import check_timezone
from gateway.scheduling.scheduler import Cron
from gateway.store.repository import Store
from gateway.store.task_ops import NewTask, TaskKind, TaskRecord
from gateway.wire import InboxPayload

_log = logging.getLogger(__name__)

CRON_GAPS_CHECKED = 24
"""How many consecutive cron fire times are checked against the minimum interval."""
TASK_AUTHOR = "scheduled task"


def describe(kind: TaskKind, spec: str, zone: str) -> str:
    """A task's schedule in words: ``once at 2026-12-01 09:00 (Europe/Berlin)``, ``every 3600 s``."""
    if kind == "at":
        return f"once at {datetime.fromisoformat(spec).astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} ({zone})"
    if kind == "cron":
        return f"cron {spec} ({zone})"
    return f"every {spec} s"


def view(task: TaskRecord) -> TaskView:
    return TaskView(
        id=task.id,
        prompt=task.prompt,
        schedule=describe(task.kind, task.spec, task.timezone),
        timezone=task.timezone,
        status=task.status,
        next_run_at=task.next_run_at,
        runs=task.runs,
        created_at=task.created_at,
    )


def next_run(task: TaskRecord, now: datetime) -> datetime | None:
    """When ``task`` runs after the run due now: missed runs (the service was down) collapse into
    the one running now; a one-shot has no next run."""
    if task.kind == "at":
        return None
    if task.kind == "cron":
        return Cron(task.spec, task.timezone).next_after(now)
    every = timedelta(seconds=int(task.spec))
    due = task.next_run_at or now
    skipped = max(0, int((now - due) / every))
    return due + every * (skipped + 1)


class TaskBook:
    """The tasks of every chat, for the ``schedule`` tool, the chat commands and the ``tasks`` job."""

    def __init__(
        self,
        store: Store,
        settings: TaskSettings,
        *,
        timezone: str,
        clock: Clock = utcnow,
    ) -> None:
        self._store = store
        self._settings = settings
        self._timezone = timezone
        self._clock = clock

    # the agent's protocol -----------------------------------------------------------------
    async def create_task(self, session: AgentSession, request: TaskRequest) -> TaskView:
        now = self._clock()
        info = await self._store.get_session(session.id)
        zone = self._zone(request.timezone, info.key, info.platform, info.chat_id)
        prompt = request.prompt.strip()
        if len(prompt) > self._settings.max_prompt_chars:
            raise TaskRejected(
                f"prompt is {len(prompt):,} characters; at most {self._settings.max_prompt_chars:,} allowed"
            )
        kind, spec, first = self._schedule(request, zone, now)
        task = NewTask(
            session_key=info.key,
            platform=info.platform,
            chat_id=info.chat_id,
            thread_id=info.thread_id,
            session_id=info.id,
            prompt=prompt,
            kind=kind,
            spec=spec,
            timezone=zone,
            next_run_at=first,
        )
        stored = await self._store.task_create(task, now=now, max_active=self._settings.max_per_chat)
        if stored is None:
            raise TaskRejected(
                f"this chat already has {self._settings.max_per_chat} active tasks, the most allowed; "
                "cancel one first"
            )
        _log.info(
            "task %s created: %s",
            stored.id,
            describe(kind, spec, zone),
            extra={"session": session.id, "key": info.key, "task": stored.id},
        )
        return view(stored)

    async def list_tasks(self, session: AgentSession) -> list[TaskView]:
        return await self.tasks_of(await self._key(session))

    async def cancel_task(self, session: AgentSession, task_id: str) -> TaskView:
        return await self.cancel(await self._key(session), task_id)

    # for chat commands ----------------------------------------------------------------------
    async def tasks_of(self, key: str) -> list[TaskView]:
        return [view(t) for t in await self._store.task_list(session_key=key)]

    async def cancel(self, key: str, task_id: str) -> TaskView:
        """Cancel the chat's active task ``task_id`` (raises :class:`TaskRejected` when there is none)."""
        cancelled = await self._store.task_cancel(key, task_id.strip(), now=self._clock())
        if cancelled is None:
            raise TaskRejected(
                f"no active task {task_id.strip()[:40]!r} in this chat (see the list of tasks)"
            )
        _log.info("task %s cancelled", cancelled.id, extra={"key": key, "task": cancelled.id})
        return view(cancelled)

    # the tasks job --------------------------------------------------------------------------
    async def fire_due(self, now: datetime) -> list[str]:
        """Queue every due task run in its chat's inbox; returns the chats' session keys, one per run."""
        fired: list[str] = []
        for task in await self._store.task_due(now):
            payload = run_payload(task, now)
            inbox_id = await self._store.task_fire(
                task, now=now, next_run_at=next_run(task, now), payload=payload
            )
            if inbox_id is None:
                continue
            fired.append(task.session_key)
            _log.info(
                "task %s is due: queued run %d in its chat",
                task.id,
                task.runs + 1,
                extra={"key": task.session_key, "task": task.id, "inbox_id": inbox_id},
            )
        return fired

    # reading a request ----------------------------------------------------------------------
    def chat_zone(self, key: str, platform: str, chat_id: str) -> str:
        """The chat's time zone: its entry in ``chat_timezones`` (by session key or
        ``platform:chat_id``), else the configured default."""
        zones = self._settings.chat_timezones
        return zones.get(key) or zones.get(f"{platform}:{chat_id}") or self._timezone

    def _zone(self, asked: str | None, key: str, platform: str, chat_id: str) -> str:
        if asked is None or not asked.strip():
            return self.chat_zone(key, platform, chat_id)
        try:
            check_timezone(asked.strip())
        except ValueError as exc:
            raise TaskRejected(str(exc)) from None
        return asked.strip()

    def _schedule(self, request: TaskRequest, zone: str, now: datetime) -> tuple[TaskKind, str, datetime]:
        if request.at is not None:
            at = self._parse_at(request.at, zone, now)
            return "at", at.isoformat(), at
        if request.cron is not None:
            return self._cron(request.cron, zone, now)
        every = request.every_seconds or 0
        minimum = self._settings.min_interval_seconds
        if every < minimum:
            raise TaskRejected(f"every_seconds {every} is below the minimum interval of {minimum} seconds")
        return "every", str(every), now + timedelta(seconds=every)

    def _parse_at(self, text: str, zone: str, now: datetime) -> datetime:
        try:
            at = datetime.fromisoformat(text.strip())
        except ValueError:
            raise TaskRejected(
                f"at {text[:60]!r} is not an ISO-8601 date-time "
                "(for example 2026-12-01T09:00 or 2026-12-01T09:00+01:00)"
            ) from None
        if at.tzinfo is None:
            at = at.replace(tzinfo=ZoneInfo(zone))
        if at <= now:
            here = now.astimezone(ZoneInfo(zone))
            raise TaskRejected(
                f"at {text[:60]} is in the past (it is now {here:%Y-%m-%d %H:%M} in {zone}); "
                "give a future time"
            )
        return at.astimezone(UTC)

    def _cron(self, expression: str, zone: str, now: datetime) -> tuple[TaskKind, str, datetime]:
        try:
            cron = Cron(expression, zone)
        except ValueError as exc:
            raise TaskRejected(str(exc)) from None
        fires: list[datetime] = []
        moment: datetime | None = now
        while moment is not None and len(fires) < CRON_GAPS_CHECKED:
            moment = cron.next_after(moment)
            if moment is not None:
                fires.append(moment)
        if not fires:
            raise TaskRejected(f"cron {cron.expression!r} never fires")
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(fires)]
        minimum = self._settings.min_interval_seconds
        if gaps and min(gaps) < minimum:
            raise TaskRejected(
                f"cron {cron.expression!r} fires every {min(gaps):.0f} seconds, more often than the "
                f"minimum interval of {minimum} seconds"
            )
        return "cron", cron.expression, fires[0]

    async def _key(self, session: AgentSession) -> str:
        """The chat of ``session``, as the gateway named it (never anything the model said)."""
        return session.key or (await self._store.get_session(session.id)).key


def run_payload(task: TaskRecord, now: datetime) -> InboxPayload:
    """The inbox payload of a task's run: the prompt, introduced as a scheduled task, for its chat."""
    due = task.next_run_at or now
    local_due = due.astimezone(ZoneInfo(task.timezone))
    text = (
        f"Scheduled task {task.id} ({describe(task.kind, task.spec, task.timezone)}), set earlier in this "
        f"chat, is due (scheduled for {local_due:%Y-%m-%d %H:%M} {task.timezone}). Its instructions: "
        f"{task.prompt}"
    )
    return InboxPayload(
        edit_of=None,
        text=text,
        user_id=f"task:{task.id}",
        user_name=TASK_AUTHOR,
        chat_type=None,
        thread_id=task.thread_id,
        timestamp=now.astimezone(UTC).isoformat(),
        edited=False,
        reply_to_message_id=None,
        attachments=[],
        truncated_from=None,
        scheduled_task=task.id,
    )


def _conforms(book: TaskBook) -> TaskStore:
    return book  # mypy proves TaskBook is what the schedule tool expects
