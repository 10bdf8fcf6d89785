"""Telegram delivery guarantees: confirm after commit, redeliver on failure, survive bad input, webhooks."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.errors import ConfigError
from gateway.config import TelegramSettings
from gateway.errors import AdapterError
from gateway.platforms.base import InboundMessage, OutboundTarget
from gateway.platforms.telegram_bot.adapter import TelegramAdapter
from tests.fakes.telegram import FakeTelegram
from tests.gateway.inbox_recorder import Inbox, echo
from tests.gateway.telegram_support import free_port, make_adapter, running


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def blocking(gate: asyncio.Event, entered: asyncio.Event | None = None) -> Any:
    async def before(message: InboundMessage) -> None:
        if entered is not None:
            entered.set()
        await gate.wait()

    return before


async def test_the_offset_is_confirmed_only_after_the_handler_returns(fake: FakeTelegram) -> None:
    gate, entered = asyncio.Event(), asyncio.Event()
    inbox = Inbox()
    inbox.before = blocking(gate, entered)
    async with running(fake, inbox):
        uid = fake.push_message(42, "hold on", user_id=42)["update_id"]
        await asyncio.wait_for(entered.wait(), 5)
        await asyncio.sleep(0.5)  # longer than a poll cycle: nothing may confirm it meanwhile
        assert fake.acked_offset <= uid
        assert uid in fake.pending_update_ids
        gate.set()
        await inbox.wait_for(1)
        await fake.wait_for_acked(uid + 1)
    assert fake.pending_update_ids == []


async def test_an_update_is_redelivered_after_a_stop_before_the_handler_finished(fake: FakeTelegram) -> None:
    gate, entered = asyncio.Event(), asyncio.Event()
    stuck = Inbox()
    stuck.before = blocking(gate, entered)
    adapter = make_adapter(fake, stop_grace=0.2)
    await adapter.start(stuck)
    update = fake.push_message(42, "do not lose me", user_id=42)
    await asyncio.wait_for(entered.wait(), 5)
    await adapter.stop()
    assert stuck.messages == []
    assert update["update_id"] in fake.pending_update_ids

    again = Inbox()
    async with running(fake, again):
        [msg] = await again.wait_for(1)
        await fake.wait_for_acked(update["update_id"] + 1)
    assert msg.platform_message_id == f"42:{update['message']['message_id']}"
    assert msg.text == "do not lose me"


async def test_an_update_whose_handler_failed_is_delivered_again(fake: FakeTelegram) -> None:
    attempts: list[str] = []

    async def flaky(message: InboundMessage) -> None:
        attempts.append(message.text)
        if len(attempts) == 1:
            raise RuntimeError("inbox unavailable")

    inbox = Inbox()
    inbox.before = flaky
    async with running(fake, inbox):
        uid = fake.push_message(42, "retry me", user_id=42)["update_id"]
        [msg] = await inbox.wait_for(1, timeout=8)
        await fake.wait_for_acked(uid + 1)
    assert attempts == ["retry me", "retry me"]
    assert msg.text == "retry me"


async def test_updates_are_handed_over_one_at_a_time(fake: FakeTelegram) -> None:
    gate, entered = asyncio.Event(), asyncio.Event()
    seen: list[str] = []

    async def first_blocks(message: InboundMessage) -> None:
        seen.append(message.text)
        if message.text == "one":
            entered.set()
            await gate.wait()

    inbox = Inbox()
    inbox.before = first_blocks
    async with running(fake, inbox):
        fake.push_message(42, "one", user_id=42)
        fake.push_message(42, "two", user_id=42)
        await asyncio.wait_for(entered.wait(), 5)
        await asyncio.sleep(0.3)
        assert seen == ["one"]
        gate.set()
        messages = await inbox.wait_for(2)
    assert [m.text for m in messages] == ["one", "two"]


async def test_malformed_and_unknown_updates_do_not_stop_polling(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_update({"message": {"message_id": 1, "date": 1, "text": "no chat"}})
        fake.push_update({"brand_new_update_kind": {"x": 1}})
        fake.push_update({"message": "not an object"})
        fake.push_message(42, None, user_id=42, extra={"future_field": {"a": [1, 2]}})
        last = fake.push_message(42, "still here", user_id=42)
        [msg] = await inbox.wait_for(1)
        await fake.wait_for_acked(last["update_id"] + 1)
    assert msg.text == "still here"


async def test_server_errors_while_polling_are_retried(fake: FakeTelegram) -> None:
    fake.fail_next("getUpdates", 502)
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(42, "after the outage", user_id=42)
        [msg] = await inbox.wait_for(1, timeout=8)
    assert msg.text == "after the outage"
    assert 502 in [c.status for c in fake.calls("getUpdates")]


async def test_start_with_a_rejected_token_raises_adapter_error(fake: FakeTelegram) -> None:
    adapter = TelegramAdapter("999:not-the-token", base_url=fake.root, settings=TelegramSettings())
    with pytest.raises(AdapterError, match="could not start"):
        await adapter.start(Inbox())
    await adapter.stop()  # idempotent: nothing was started


async def test_an_adapter_can_be_stopped_and_started_again(fake: FakeTelegram) -> None:
    inbox = Inbox(echo)
    adapter = make_adapter(fake)
    inbox.adapter = adapter
    for text in ("first life", "second life"):
        await adapter.start(inbox)
        fake.push_message(42, text, user_id=42)
        await fake.wait_for_sent(len(inbox.messages) + 1)
        await adapter.stop()
    assert [s.plain_text for s in fake.sent] == ["echo: first life", "echo: second life"]


async def test_a_taken_webhook_port_fails_start_cleanly(fake: FakeTelegram) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        adapter = make_adapter(fake, **webhook_settings(taken.getsockname()[1]))
        with pytest.raises(AdapterError, match="could not start"):
            await adapter.start(Inbox())
    with pytest.raises(AdapterError):
        await adapter.send(OutboundTarget("telegram", "42"), "no")


def webhook_settings(port: int) -> dict[str, Any]:
    return {
        "mode": "webhook",
        "webhook_url": f"http://127.0.0.1:{port}/telegram-hook",
        "webhook_listen": "127.0.0.1",
        "webhook_port": port,
        "webhook_secret": "s3cret-token",
    }


async def test_webhook_with_a_wrong_secret_is_refused_and_not_handled(fake: FakeTelegram) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox, **webhook_settings(free_port())):
        fake.push_message(42, "forged", user_id=42)
        assert await fake.deliver_webhook(secret_token="wrong") == [403]
        assert await fake.deliver_webhook(use_registered_secret=False) == [403]
        await asyncio.sleep(0.1)
    assert inbox.messages == []
    assert fake.sent == []


async def test_webhook_with_the_right_secret_is_handled_and_answered(fake: FakeTelegram) -> None:
    port = free_port()
    inbox = Inbox(echo)
    async with running(fake, inbox, **webhook_settings(port)):
        assert fake.webhook is not None
        assert fake.webhook["url"] == f"http://127.0.0.1:{port}/telegram-hook"
        assert fake.webhook["secret_token"] == "s3cret-token"
        fake.push_message(42, "via webhook", user_id=42)
        assert await fake.deliver_webhook() == [200]
        [msg] = await inbox.wait_for(1)
    assert msg.text == "via webhook"
    assert [s.plain_text for s in fake.sent] == ["echo: via webhook"]


async def test_webhook_answers_500_when_the_handler_fails_so_telegram_retries(fake: FakeTelegram) -> None:
    calls: list[str] = []

    async def fail_once(message: InboundMessage) -> None:
        calls.append(message.text)
        if len(calls) == 1:
            raise RuntimeError("database down")

    inbox = Inbox()
    inbox.before = fail_once
    async with running(fake, inbox, **webhook_settings(free_port())):
        fake.push_message(42, "important", user_id=42)
        assert await fake.deliver_webhook() == [500]
        assert await fake.deliver_webhook() == [200]
        [msg] = await inbox.wait_for(1)
    assert msg.text == "important"
    assert calls == ["important", "important"]


def test_webhook_mode_without_a_secret_is_a_config_error(fake: FakeTelegram) -> None:
    settings = webhook_settings(8443)
    del settings["webhook_secret"]
    with pytest.raises(ConfigError):
        make_adapter(fake, **settings)
