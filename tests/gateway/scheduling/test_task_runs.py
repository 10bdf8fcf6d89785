"""Tasks through the whole service (``Service.build``, as ``hygieia run`` wires it): the model sets
them with the ``schedule`` tool, the ``tasks`` job fires them, the gateway answers in their chat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from gateway.config import Settings
from gateway.runner import Service
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.gateway.conftest import MODEL, RecordingAdapter, inbound
from tests.gateway.platforms.telegram_bot.test_telegram_service import until
from tests.gateway.scheduling_model import SchedulingModel, task_id_in


@asynccontextmanager
async def service(
    tmp_path: Path, db_url: str
) -> AsyncIterator[tuple[Service, RecordingAdapter, SchedulingModel]]:
    model = SchedulingModel()
    adapter = RecordingAdapter()
    async with FakeAnthropic(responder=model) as fake:
        settings = Settings(
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=fake.base_url,
            model=MODEL,
            llm={"max_retries": 0},
            allow_all_users=True,
            sessions={"turn_grace_seconds": 0.2},
            scheduler={
                "tasks": {"poll_seconds": 0.2, "min_interval_seconds": 1},
                "sweep": {"enabled": False},
            },
        )
        built = await Service.build(settings, [adapter], migrate=False)
        await built.start()
        try:
            yield built, adapter, model
        finally:
            await built.stop()


async def say(svc: Service, text: str, chat: str, message_id: str) -> None:
    await svc.gateway.intake(inbound(text, chat_id=chat, message_id=message_id))


def texts_to(adapter: RecordingAdapter, chat: str, prefix: str) -> list[str]:
    return [s.text for s in adapter.sent if s.target.chat_id == chat and s.text.startswith(prefix)]


async def test_a_reminder_runs_a_turn_in_its_own_chat_and_the_answer_goes_there(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    async with service(tmp_path, db_url) as (svc, adapter, _model):
        await say(svc, "remind me in 2 seconds: call the bank", "alice", "a1")
        await say(svc, "hello from bob", "bob", "b1")
        await until(lambda: bool(texts_to(adapter, "alice", "RUN:")), within=20)
        await asyncio.sleep(0.5)

    [run] = [s for s in adapter.sent if s.text.startswith("RUN:")]
    assert run.target.chat_id == "alice" and run.text == "RUN: call the bank"
    assert run.target.reply_to_message_id is None  # a scheduled run quotes nothing
    assert texts_to(adapter, "bob", "RUN:") == []
    info = await store.current_session("test:dm:alice")
    assert info is not None
    [marked] = [m for m in await store.messages_after(info.id, 0) if m.author_name == "scheduled task"]
    assert marked.role == "user" and "Scheduled task" in marked.text and "call the bank" in marked.text
    [task] = await store.task_list(status=None)
    assert (task.status, task.runs, task.chat_id) == ("done", 1, "alice")


async def test_tasks_lists_this_chats_tasks_and_cancel_stops_a_recurring_one(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    async with service(tmp_path, db_url) as (svc, adapter, _model):
        await say(svc, "every 1 seconds: say tick", "alice", "a1")
        await say(svc, "every 3600 seconds: bob's thing", "bob", "b1")
        await until(lambda: len(texts_to(adapter, "alice", "RUN: say tick")) >= 2, within=20)
        task_id = task_id_in(texts_to(adapter, "alice", "Done.")[0])

        await say(svc, "/tasks", "alice", "a2")
        await until(lambda: bool(texts_to(adapter, "alice", "Tasks in this chat")), within=10)
        await say(svc, f"/cancel {task_id}", "alice", "a3")
        await until(lambda: bool(texts_to(adapter, "alice", "Cancelled task")), within=10)
        await asyncio.wait_for(svc.gateway.wait_idle(), 10)
        ticks_at_cancel = len(texts_to(adapter, "alice", "RUN: say tick"))
        await asyncio.sleep(2.5)
        ticks_later = len(texts_to(adapter, "alice", "RUN: say tick"))
        await say(svc, f"/cancel {task_id}", "alice", "a4")
        await until(lambda: bool(texts_to(adapter, "alice", "There is no active task")), within=10)

    [listing] = texts_to(adapter, "alice", "Tasks in this chat")
    assert task_id in listing and "say tick" in listing and "bob's thing" not in listing
    assert ticks_later == ticks_at_cancel
    [task] = await store.task_list(status="cancelled")
    assert task.id == task_id


async def test_a_chat_cannot_cancel_another_chats_task(tmp_path: Path, db_url: str, store: Store) -> None:
    async with service(tmp_path, db_url) as (svc, adapter, _model):
        await say(svc, "every 3600 seconds: alice's thing", "alice", "a1")
        await until(lambda: bool(texts_to(adapter, "alice", "Done.")), within=10)
        task_id = task_id_in(texts_to(adapter, "alice", "Done.")[0])

        await say(svc, f"/cancel {task_id}", "bob", "b1")
        await say(svc, f"cancel task {task_id}", "bob", "b2")
        await until(lambda: len([s for s in adapter.sent if s.target.chat_id == "bob"]) >= 2, within=10)

    to_bob = [s.text for s in adapter.sent if s.target.chat_id == "bob"]
    assert any(t.startswith("There is no active task") for t in to_bob)
    assert any("no active task" in t and t.startswith("Done.") for t in to_bob)
    assert [t.status for t in await store.task_list(status=None)] == ["active"]
