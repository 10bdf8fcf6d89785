"""Delivery anywhere: send-only adapters, and a chat's replies in order across workers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.outbound.delivery import Delivery
from gateway.platforms.base import OutboundTarget
from gateway.platforms.telegram_bot.adapter import TelegramAdapter
from gateway.store.repository import Store
from tests.fakes.telegram import FakeTelegram
from tests.gateway.telegram_support import make_adapter

TARGET = {"platform": "telegram", "chat_id": "42", "thread_id": None, "reply_to_message_id": None}


async def put(store: Store, text: str, target: dict[str, str | None]) -> None:
    await store.outbox_put(session_id=None, target=target, text=text, inbox_ids=[], message_id=None)


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def _sender(fake: FakeTelegram) -> TelegramAdapter:
    adapter = make_adapter(fake)
    await adapter.start_sending()
    return adapter


async def test_a_send_only_adapter_sends_without_polling(fake: FakeTelegram) -> None:
    adapter = await _sender(fake)
    try:
        await asyncio.sleep(0.3)
        assert fake.calls("getUpdates") == [] and fake.calls("deleteWebhook") == []
        assert await adapter.send(OutboundTarget("telegram", "42"), "hello")
        assert [m.plain_text for m in fake.sent] == ["hello"]
    finally:
        await adapter.stop()


async def test_two_workers_keep_one_chats_replies_in_order(fake: FakeTelegram, store: Store) -> None:
    """Worker A is still sending reply 1 (waiting out a 429) when reply 2 becomes due; worker B
    must not send reply 2 first. Before the per-chat claim it did."""
    a, b = await _sender(fake), await _sender(fake)
    try:
        worker_a = Delivery(store, {"telegram": a}, owner="worker-a")
        worker_b = Delivery(store, {"telegram": b}, owner="worker-b")
        await store.outbox_put(
            session_id=None, target=TARGET, text="reply one", inbox_ids=[], message_id=None
        )
        fake.fail_next("sendMessage", 429, retry_after=1)
        first = asyncio.create_task(worker_a.flush())
        await fake.wait_for_call("sendMessage")  # A's rate limiter now waits out the 429
        await store.outbox_put(
            session_id=None, target=TARGET, text="reply two", inbox_ids=[], message_id=None
        )
        second = asyncio.create_task(worker_b.flush())
        assert await second == 0  # the chat is A's until A's round ends
        assert await first == 1
        assert await worker_b.flush() == 1
        assert [m.plain_text for m in fake.sent] == ["reply one", "reply two"]
    finally:
        await a.stop()
        await b.stop()


async def test_other_chats_are_not_held_up_by_a_busy_one(fake: FakeTelegram, store: Store) -> None:
    a, b = await _sender(fake), await _sender(fake)
    try:
        worker_a = Delivery(store, {"telegram": a}, owner="worker-a")
        worker_b = Delivery(store, {"telegram": b}, owner="worker-b")
        await put(store, "slow", TARGET)
        fake.fail_next("sendMessage", 429, retry_after=1)
        first = asyncio.create_task(worker_a.flush())
        await fake.wait_for_call("sendMessage")
        other = {**TARGET, "chat_id": "43"}
        await put(store, "quick", other)
        assert await worker_b.flush() == 1
        assert [m.plain_text for m in fake.sent] == ["quick"]
        await first
    finally:
        await a.stop()
        await b.stop()
