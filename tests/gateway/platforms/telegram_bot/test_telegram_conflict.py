"""The fake Bot API serves one long poller per token, as Telegram does.

Two python-telegram-bot pollers on one token: the second concurrent ``getUpdates`` is answered
409 "Conflict: terminated by other getUpdates request", which PTB raises as
:class:`telegram.error.Conflict`. A poller that goes away frees the token for the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from telegram import Bot, Update
from telegram.error import Conflict, TelegramError
from telegram.ext import Application, TypeHandler

from tests.fakes.telegram import FakeTelegram


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(long_poll_cap=1.0) as server:
        yield server


def _app(fake: FakeTelegram, seen: list[int]) -> Application[Any, Any, Any, Any, Any, Any]:
    app = (
        Application.builder()
        .token(fake.token)
        .base_url(fake.bot_base_url)
        .base_file_url(fake.file_base_url)
        .job_queue(None)
        .build()
    )

    async def record(update: object, _context: object) -> None:
        if isinstance(update, Update):
            seen.append(update.update_id)

    app.add_handler(TypeHandler(Update, record))
    return app


async def test_a_second_concurrent_poller_gets_409_conflict(fake: FakeTelegram) -> None:
    async with (
        Bot(fake.token, base_url=fake.bot_base_url) as first,
        Bot(fake.token, base_url=fake.bot_base_url) as second,
    ):
        waiting = asyncio.create_task(first.get_updates(timeout=5))
        await fake.wait_for_call("getUpdates")
        await asyncio.sleep(0.05)
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await second.get_updates(timeout=5)
        assert await waiting == ()
        assert fake.conflicts == 1
        # The first poller's wait is over: the token is free again.
        assert await second.get_updates(timeout=0) == ()


async def test_two_polling_applications_one_gets_every_update_the_other_conflicts(
    fake: FakeTelegram,
) -> None:
    seen_a: list[int] = []
    seen_b: list[int] = []
    errors_b: list[TelegramError] = []
    app_a, app_b = _app(fake, seen_a), _app(fake, seen_b)
    async with app_a, app_b:
        await app_a.start()
        assert app_a.updater is not None and app_b.updater is not None
        await app_a.updater.start_polling(timeout=5, poll_interval=0.0)
        await fake.wait_for_call("getUpdates")
        await app_b.start()
        await app_b.updater.start_polling(timeout=5, poll_interval=0.0, error_callback=errors_b.append)
        ids = [fake.push_message(7, f"m{i}", user_id=7)["update_id"] for i in range(3)]
        for _ in range(100):
            if errors_b and len(seen_a) + len(seen_b) >= 3:
                break
            await asyncio.sleep(0.05)
        assert any(isinstance(e, Conflict) for e in errors_b)
        assert fake.conflicts >= 1
        assert sorted(seen_a + seen_b) == ids  # each update once, whoever got it
        await app_b.updater.stop()
        await app_b.stop()
        await app_a.updater.stop()
        await app_a.stop()


async def test_a_poller_that_hangs_up_frees_the_token(fake: FakeTelegram) -> None:
    async with (
        Bot(fake.token, base_url=fake.bot_base_url) as first,
        Bot(fake.token, base_url=fake.bot_base_url) as second,
    ):
        waiting = asyncio.create_task(first.get_updates(timeout=5))
        await fake.wait_for_call("getUpdates")
        await asyncio.sleep(0.05)
        waiting.cancel()  # httpx closes the connection, as a killed process would
        await asyncio.gather(waiting, return_exceptions=True)
        await asyncio.sleep(0.15)
        update = fake.push_message(7, "after", user_id=7)["update_id"]
        assert [u.update_id for u in await second.get_updates(timeout=5)] == [update]
        assert fake.conflicts == 0
