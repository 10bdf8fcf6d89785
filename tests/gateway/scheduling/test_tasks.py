"""Reminders and recurring tasks: the ``schedule`` tool over the real TaskBook and SQL store, and firing.

The tool is called as the agent loop calls it (``ToolRegistry.dispatch``), so bad input comes
back as the error result the model reads.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.tools import ToolContext, ToolOutput, ToolRegistry
from agent.tools.schedule import ScheduleTool
from agent.types import AgentSession
from gateway.config import TaskSettings
from gateway.scheduling.tasks import TaskBook, next_run
from gateway.store.repository import Store
from gateway.store.task_ops import TaskRecord, run_message_id

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a Monday; 13:00 in Berlin


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def chat_session(store: Store, chat: str = "42", *, platform: str = "telegram") -> AgentSession:
    key = f"{platform}:dm:{chat}"
    info = await store.get_or_create_session(
        key, platform=platform, chat_id=chat, system_prompt="You are helpful.", model="claude-test"
    )
    return AgentSession(info.id, info.system_prompt, info.model, 200_000, key=key, platform=platform)


def book_of(store: Store, clock: Clock, **settings: Any) -> TaskBook:
    values: dict[str, Any] = {"max_per_chat": 3, "min_interval_seconds": 300, **settings}
    return TaskBook(store, TaskSettings(**values), timezone="Europe/Berlin", clock=clock)


async def call(book: TaskBook, session: AgentSession, store: Store, **tool_input: Any) -> ToolOutput:
    registry = ToolRegistry([ScheduleTool(book)])
    ctx = ToolContext(session, store, session.key, lambda: NOW)
    return await registry.dispatch(ctx, "schedule", tool_input)


def the_id(output: ToolOutput) -> str:
    assert not output.is_error, output.text
    return output.text.split("Scheduled task ", 1)[1].split(":", 1)[0]


# --- bad input: one clear line back to the model --------------------------------------------


@pytest.mark.parametrize(
    ("tool_input", "expected"),
    [
        ({"action": "create", "prompt": "call the bank", "at": "2026-11-30T09:00"}, "is in the past"),
        ({"action": "create", "prompt": "call the bank", "at": "tomorrow at 9"}, "not an ISO-8601 date-time"),
        ({"action": "create", "prompt": "x", "cron": "every day at nine"}, "must have 5 fields"),
        ({"action": "create", "prompt": "x", "cron": "61 25 * * *"}, "is not valid"),
        ({"action": "create", "prompt": "x", "cron": "0 0 31 2 *"}, "never fires"),
        ({"action": "create", "prompt": "x", "cron": "*/1 * * * *"}, "minimum interval of 300 seconds"),
        ({"action": "create", "prompt": "x", "every_seconds": 60}, "below the minimum interval of 300"),
        (
            {"action": "create", "prompt": "x", "at": "2026-12-01T09:00", "timezone": "Mars/Olympus_Mons"},
            "unknown time zone 'Mars/Olympus_Mons'",
        ),
        ({"action": "create", "at": "2026-12-01T09:00"}, "create needs a prompt"),
        ({"action": "create", "prompt": "x"}, "exactly one of at"),
        ({"action": "create", "prompt": "x", "at": "2026-12-01T09:00", "cron": "0 9 * * *"}, "got at, cron"),
        ({"action": "cancel"}, "cancel needs the id"),
        ({"action": "cancel", "id": "nope"}, "no active task 'nope' in this chat"),
        ({"action": "snooze"}, "must be one of"),
    ],
)
async def test_bad_input_is_a_clear_one_line_tool_error(
    store: Store, tool_input: dict[str, Any], expected: str
) -> None:
    session = await chat_session(store)
    output = await call(book_of(store, Clock()), session, store, **tool_input)
    assert output.is_error and expected in output.text and "\n" not in output.text
    assert await store.task_list(status=None) == []


async def test_over_the_per_chat_limit_is_a_tool_error_and_other_chats_are_unaffected(store: Store) -> None:
    book = book_of(store, Clock(), max_per_chat=2)
    alice, bob = await chat_session(store, "42"), await chat_session(store, "77")
    for hour in (9, 10):
        the_id(await call(book, alice, store, action="create", prompt="p", at=f"2026-12-01T{hour:02d}:00"))

    refused = await call(book, alice, store, action="create", prompt="p", at="2026-12-01T11:00")
    for_bob = await call(book, bob, store, action="create", prompt="p", at="2026-12-01T11:00")

    assert refused.is_error and "already has 2 active tasks" in refused.text
    assert not for_bob.is_error


# --- creating, listing, cancelling ---------------------------------------------------------


async def test_a_time_without_offset_is_in_the_chat_time_zone(store: Store) -> None:
    book = book_of(store, Clock(), chat_timezones={"telegram:dm:42": "America/New_York"})
    ny, berlin = await chat_session(store, "42"), await chat_session(store, "77")

    first = the_id(await call(book, ny, store, action="create", prompt="p", at="2026-12-01T09:00"))
    second = the_id(await call(book, berlin, store, action="create", prompt="p", at="2026-12-01T09:00"))
    third = the_id(
        await call(
            book, berlin, store, action="create", prompt="p", at="2026-12-01T09:00", timezone="Asia/Tokyo"
        )
    )
    explicit = the_id(await call(book, berlin, store, action="create", prompt="p", at="2026-12-01T09:00Z"))

    runs = {t.id: t.next_run_at for t in await store.task_list()}
    assert runs[first] == datetime(2026, 12, 1, 14, 0, tzinfo=UTC)  # 09:00 EST
    assert runs[second] == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)  # 09:00 CET (the default zone)
    assert runs[third] == datetime(2026, 12, 1, 0, 0, tzinfo=UTC)  # 09:00 JST
    assert runs[explicit] == datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def test_a_cron_task_runs_on_crontab_weekdays_in_its_zone(store: Store) -> None:
    book = book_of(store, Clock())
    session = await chat_session(store)

    task_id = the_id(
        await call(book, session, store, action="create", prompt="summarize the night", cron="30 8 * * 1-5")
    )

    [task] = await store.task_list()
    assert task.id == task_id and task.kind == "cron" and task.timezone == "Europe/Berlin"
    local = task.next_run_at.astimezone(ZoneInfo("Europe/Berlin")) if task.next_run_at else None
    assert local is not None and local.strftime("%a %d %H:%M") == "Tue 01 08:30"


async def test_list_shows_only_this_chat_and_cancel_cannot_reach_another_chat(store: Store) -> None:
    book = book_of(store, Clock())
    alice, bob = await chat_session(store, "42"), await chat_session(store, "77")
    alice_task = the_id(await call(book, alice, store, action="create", prompt="alice's", every_seconds=3600))
    the_id(await call(book, bob, store, action="create", prompt="bob's", every_seconds=3600))

    listed = await call(book, alice, store, action="list")
    bob_cancels = await call(book, bob, store, action="cancel", id=alice_task)
    alice_cancels = await call(book, alice, store, action="cancel", id=alice_task)
    after = await call(book, alice, store, action="list")

    assert "alice's" in listed.text and "bob's" not in listed.text and alice_task in listed.text
    assert bob_cancels.is_error and "no active task" in bob_cancels.text
    assert not alice_cancels.is_error and f"Cancelled task {alice_task}" in alice_cancels.text
    assert "No active tasks in this chat." in after.text


# --- firing ---------------------------------------------------------------------------------


async def test_a_due_one_shot_becomes_one_inbox_item_for_its_chat_and_is_done(store: Store) -> None:
    clock = Clock()
    book = book_of(store, clock)
    session = await chat_session(store, "42")
    task_id = the_id(
        await call(book, session, store, action="create", prompt="call the bank", at="2026-12-01T09:00")
    )

    early = await book.fire_due(datetime(2026, 12, 1, 7, 59, tzinfo=UTC))
    due = await book.fire_due(datetime(2026, 12, 1, 8, 0, 5, tzinfo=UTC))
    again = await book.fire_due(datetime(2026, 12, 1, 8, 1, tzinfo=UTC))

    assert (early, due, again) == ([], ["telegram:dm:42"], [])
    [item] = await store.inbox_claim(worker="w", lease_seconds=30)
    assert (item.platform, item.chat_id, item.session_key) == ("telegram", "42", "telegram:dm:42")
    assert item.platform_message_id == run_message_id(task_id, 1) and item.addressed
    assert item.payload["scheduled_task"] == task_id and item.payload["user_name"] == "scheduled task"
    assert "Scheduled task" in item.payload["text"] and item.payload["text"].endswith("call the bank")
    [task] = await store.task_list(status=None)
    assert (task.status, task.runs, task.next_run_at) == ("done", 1, None)


async def test_a_recurring_task_fires_once_per_period_and_a_missed_stretch_collapses_into_one_run(
    store: Store,
) -> None:
    book = book_of(store, Clock())
    session = await chat_session(store)
    the_id(await call(book, session, store, action="create", prompt="tick", every_seconds=3600))
    first_due = NOW + timedelta(hours=1)

    assert await book.fire_due(first_due) == ["telegram:dm:42"]
    # The service was down for five hours: one run now, the next on the original grid.
    assert await book.fire_due(first_due + timedelta(hours=5, minutes=10)) == ["telegram:dm:42"]
    assert await book.fire_due(first_due + timedelta(hours=5, minutes=20)) == []

    [task] = await store.task_list()
    assert task.runs == 2 and task.next_run_at == first_due + timedelta(hours=6)


async def test_a_cancelled_task_never_fires(store: Store) -> None:
    book = book_of(store, Clock())
    session = await chat_session(store)
    task_id = the_id(await call(book, session, store, action="create", prompt="tick", every_seconds=3600))
    await call(book, session, store, action="cancel", id=task_id)

    assert await book.fire_due(NOW + timedelta(days=2)) == []


async def test_two_firings_of_the_same_run_queue_it_once(store: Store) -> None:
    book = book_of(store, Clock())
    session = await chat_session(store)
    the_id(await call(book, session, store, action="create", prompt="p", at="2026-12-01T09:00"))
    [task] = await store.task_list()
    later = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    first = await store.task_fire(task, now=later, next_run_at=None, payload={"text": "p"})
    second = await store.task_fire(task, now=later, next_run_at=None, payload={"text": "p"})

    assert first is not None and second is None


def test_the_next_run_of_an_interval_task_stays_on_its_grid() -> None:
    task = TaskRecord(
        "t", "k", "p", "c", None, None, "x", "every", "600", "UTC", "active", NOW, None, 0, NOW, None
    )
    assert next_run(task, NOW + timedelta(seconds=1)) == NOW + timedelta(minutes=10)
    assert next_run(task, NOW + timedelta(minutes=35)) == NOW + timedelta(minutes=40)
