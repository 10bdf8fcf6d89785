"""Reminders end to end: ``hygieia run`` as a child process, the Telegram fake, the fake model using
``schedule``. A one-shot and a recurring task survive a restart, both deliver to the chat that set
them, and ``/cancel`` stops the recurring one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.gateway.conftest import MODEL
from tests.gateway.platforms.telegram_bot.test_telegram_service import until
from tests.gateway.scheduling_model import SchedulingModel, task_id_in
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

ALICE = 42
BOB = 77
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def texts(telegram: FakeTelegram, prefix: str, chat: int | None = None) -> list[SentMessage]:
    return [s for s in telegram.sent if s.plain_text.startswith(prefix) and chat in (None, s.chat_id)]


async def test_reminders_survive_a_restart_deliver_to_their_chat_and_cancel_stops_the_recurring_one(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    model = SchedulingModel()
    async with FakeAnthropic(responder=model) as anthropic:
        env = clean_env()
        env.update(
            {
                "TELEGRAM_BOT_TOKEN": telegram.token,
                "HYGIEIA_TELEGRAM_BASE_URL": telegram.root,
                "ANTHROPIC_API_KEY": "test",
                "ANTHROPIC_BASE_URL": anthropic.base_url,
                "HYGIEIA_ALLOWED_USERS": f"telegram:{ALICE},telegram:{BOB}",
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
                "HYGIEIA_SCHEDULER__TASKS__POLL_SECONDS": "0.3",
                "HYGIEIA_SCHEDULER__TASKS__MIN_INTERVAL_SECONDS": "2",
                "PYTHONPATH": str(REPO),
            }
        )
        # First run: Alice sets a one-shot for a little later and a recurring task; Bob just chats.
        async with hygieia_run(env, tmp_path) as first:
            telegram.push_message(ALICE, "remind me in 15 seconds: call the bank", user_id=ALICE)
            await until(lambda: len(texts(telegram, "Done.", ALICE)) == 1, within=60)
            telegram.push_message(ALICE, "every 3 seconds: say tick", user_id=ALICE)
            telegram.push_message(BOB, "hello", user_id=BOB, username="bob", first_name="Bob")
            await until(
                lambda: len(texts(telegram, "Done.", ALICE)) == 2 and bool(texts(telegram, "reply:")), 60
            )
            first_log = await sigterm_and_wait(first)
        assert first.returncode == 0, first_log
        assert "scheduled jobs" in first_log and "tasks: every 0.3 s" in first_log
        one_shot_id = task_id_in(texts(telegram, "Done.", ALICE)[0].plain_text)
        recurring_id = task_id_in(texts(telegram, "Done.", ALICE)[1].plain_text)

        # Second run: both tasks fire from the database; then /cancel stops the recurring one.
        async with hygieia_run(env, tmp_path) as second:
            await until(lambda: bool(texts(telegram, "RUN: call the bank")), within=60)
            await until(lambda: len(texts(telegram, "RUN: say tick")) >= 2, within=60)
            telegram.push_message(ALICE, f"/cancel {recurring_id}", user_id=ALICE)
            await until(lambda: bool(texts(telegram, "Cancelled task")), within=30)
            await asyncio.sleep(1.0)  # a run queued just before the cancel is still answered
            ticks_after_cancel = len(texts(telegram, "RUN: say tick"))
            await asyncio.sleep(7.0)  # two more periods
            ticks_later = len(texts(telegram, "RUN: say tick"))
            second_log = await sigterm_and_wait(second)
        assert second.returncode == 0, second_log

    runs = texts(telegram, "RUN:")
    assert {s.chat_id for s in runs} == {ALICE}
    assert len(texts(telegram, "RUN: call the bank")) == 1
    assert ticks_later == ticks_after_cancel
    [cancelled] = texts(telegram, "Cancelled task")
    assert recurring_id in cancelled.plain_text and cancelled.chat_id == ALICE
    assert one_shot_id != recurring_id
    assert model.runs.count("call the bank") == 1
