"""A platform's final "no" is a dead letter at once; a passing trouble is retried.

The real python-telegram-bot and discord.py against their fake servers, the outbox worker with the
service's default retry settings (6 attempts, 2 s base backoff: about a minute of retrying) and a
clock the test moves. A permanent 4xx (Telegram 400 "chat not found", 403 "bot was blocked";
Discord 403 Missing Access, 404 Unknown Channel) is dead-lettered after its one attempt, and the
chat's later replies go out in the order they were written; 429, 5xx and network errors retry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gateway.outbound.delivery import Delivery
from gateway.outbound.failures import UNDELIVERED
from gateway.platforms.base import PlatformAdapter
from gateway.store.repository import Store
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.discord_support import running as discord_running
from tests.gateway.inbox_recorder import Inbox
from tests.gateway.telegram_support import running as telegram_running
from tests.store.engines import only

CHAT = "42"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(seconds=1)

    def __call__(self) -> datetime:
        return self.now


async def _queue(store: Store, target: dict[str, Any], *texts: str) -> list[int]:
    info = await store.get_or_create_session(
        f"{target['platform']}:dm:{target['chat_id']}",
        platform=target["platform"],
        chat_id=target["chat_id"],
        system_prompt="s",
        model="m",
    )
    return [
        await store.outbox_put(session_id=info.id, target=target, text=t, inbox_ids=[], message_id=None)
        for t in texts
    ]


async def _run_for(delivery: Delivery, clock: Clock, seconds: int) -> None:
    """Delivery rounds over ``seconds`` of simulated time, one a second."""
    for _ in range(seconds):
        await delivery.flush()
        clock.now += timedelta(seconds=1)


def _delivery(store: Store, adapter: PlatformAdapter, clock: Clock) -> Delivery:
    # The service's defaults (gateway.config.DeliverySettings): 6 attempts, 2 s base backoff.
    return Delivery(store, {adapter.name: adapter}, max_attempts=6, base_delay=2.0, clock=clock)


# --- Telegram ----------------------------------------------------------------------------------


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


TELEGRAM = {"platform": "telegram", "chat_id": CHAT, "thread_id": None, "reply_to_message_id": None}


@pytest.mark.parametrize(
    ("status", "description"),
    [(400, "Bad Request: chat not found"), (403, "Forbidden: bot was blocked by the user")],
)
async def test_a_telegram_refusal_is_a_dead_letter_at_once_and_later_replies_go_out_in_order(
    store: Store, telegram: FakeTelegram, status: int, description: str
) -> None:
    clock = Clock()
    async with telegram_running(telegram, Inbox()) as adapter:
        delivery = _delivery(store, adapter, clock)
        refused, *_ = await _queue(store, TELEGRAM, "first", "second", "third", "fourth")
        telegram.fail_next("sendMessage", status, description=description)

        await _run_for(delivery, clock, 3)

        dead = await store.outbox_get(refused)
        assert dead.status == "failed" and dead.attempts == 1
        assert dead.error is not None and description.split(": ", 1)[1].lower() in dead.error.lower()
        assert [s.text for s in telegram.sent] == ["second", "third", "fourth", UNDELIVERED]
        assert len(telegram.calls("sendMessage")) == 5  # never tried again


# Steps the delivery clock through retries: SQLite only (PostgreSQL judges due rows by its own).
@only("sqlite")
@pytest.mark.parametrize("status", [429, 500, 502])
async def test_a_passing_telegram_trouble_is_retried_not_dead_lettered(
    store: Store, telegram: FakeTelegram, status: int
) -> None:
    clock = Clock()
    async with telegram_running(telegram, Inbox(), max_send_attempts=1) as adapter:
        delivery = _delivery(store, adapter, clock)
        [row] = await _queue(store, TELEGRAM, "patience")
        telegram.fail_next("sendMessage", status, retry_after=1 if status == 429 else None, times=2)

        await _run_for(delivery, clock, 10)

        sent = await store.outbox_get(row)
        assert sent.status == "sent" and sent.attempts >= 2
        assert [s.text for s in telegram.sent] == ["patience"]


# --- Discord -----------------------------------------------------------------------------------


@pytest.fixture
async def discord_fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


MESSAGES = "POST /channels/{id}/messages"


@pytest.mark.parametrize(("status", "words"), [(403, "Missing Access"), (404, "Unknown Channel")])
async def test_a_discord_refusal_is_a_dead_letter_at_once_and_later_replies_go_out_in_order(
    store: Store, discord_fake: FakeDiscord, status: int, words: str
) -> None:
    clock = Clock()
    target = {**TELEGRAM, "platform": "discord", "chat_id": str(discord_fake.channel_id)}
    async with discord_running(discord_fake) as adapter:
        delivery = _delivery(store, adapter, clock)
        refused, *_ = await _queue(store, target, "first", "second", "third")
        discord_fake.fail_next(MESSAGES, status)

        await _run_for(delivery, clock, 3)

        dead = await store.outbox_get(refused)
        assert dead.status == "failed" and dead.attempts == 1
        assert dead.error is not None and words in dead.error
        assert [s.content for s in discord_fake.sent] == ["second", "third", UNDELIVERED]
        posts = [r for r in discord_fake.requests if r.method == "POST" and r.path.endswith("/messages")]
        assert len(posts) == 4


# Steps the delivery clock through retries: SQLite only (PostgreSQL judges due rows by its own).
@only("sqlite")
async def test_a_discord_server_error_is_retried_not_dead_lettered(
    store: Store, discord_fake: FakeDiscord
) -> None:
    clock = Clock()
    target = {**TELEGRAM, "platform": "discord", "chat_id": str(discord_fake.channel_id)}
    async with discord_running(discord_fake) as adapter:
        delivery = _delivery(store, adapter, clock)
        [row] = await _queue(store, target, "patience")
        discord_fake.fail_next(MESSAGES, 503, times=2)

        await _run_for(delivery, clock, 10)

        sent = await store.outbox_get(row)
        assert sent.status == "sent" and sent.attempts >= 2
        assert [s.content for s in discord_fake.sent] == ["patience"]
