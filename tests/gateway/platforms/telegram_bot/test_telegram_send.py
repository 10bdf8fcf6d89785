"""Telegram sending: HTML with plain-text fallback, flood limits, splitting, typing, commands."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from gateway.errors import AdapterError, DeliveryRefused
from gateway.platforms.base import OutboundTarget
from gateway.platforms.telegram_bot.adapter import DEFAULT_COMMANDS
from gateway.splitter import join_parts, split_message, utf16_len
from tests.fakes.telegram import FakeTelegram
from tests.gateway.inbox_recorder import Inbox
from tests.gateway.telegram_support import make_adapter, running

DM = OutboundTarget("telegram", "42")
GROUP = OutboundTarget("telegram", "-100555")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def test_markdown_is_sent_as_telegram_html(fake: FakeTelegram) -> None:
    async with running(fake, Inbox()) as adapter:
        ids = await adapter.send(DM, "**Bold** and `x < y` [docs](https://example.org)")
    [sent] = fake.sent
    assert sent.parse_mode == "HTML"
    assert sent.plain_text == "Bold and x < y docs"
    assert {e["type"] for e in sent.entities} == {"bold", "code", "text_link"}
    assert ids == [f"42:{sent.message_id}"]


async def test_nine_thousand_characters_arrive_as_three_messages_within_the_limit(fake: FakeTelegram) -> None:
    text = ("Long answer sentence number one goes here. 🙂 " * 250)[:9000]
    async with running(fake, Inbox()) as adapter:
        parts = split_message(text, adapter.text_limit, measure=adapter.measure)
        for part in parts:
            await adapter.send(DM, part)
    assert len(fake.sent) == 3
    assert all(utf16_len(s.plain_text) <= 4096 for s in fake.sent)
    assert join_parts([s.text for s in fake.sent]) == text


async def test_entity_parse_error_resends_the_original_as_plain_text(fake: FakeTelegram) -> None:
    text = "Use **bold** & <angle> brackets"
    fake.fail_next("sendMessage", 400)
    async with running(fake, Inbox()) as adapter:
        ids = await adapter.send(DM, text)
    [sent] = fake.sent
    assert sent.text == text
    assert sent.parse_mode is None
    assert [c.status for c in fake.calls("sendMessage")] == [400, 200]
    assert ids == [f"42:{sent.message_id}"]


async def test_flood_limit_is_waited_out_and_nothing_is_lost(fake: FakeTelegram) -> None:
    fake.fail_next("sendMessage", 429, retry_after=1)
    async with running(fake, Inbox()) as adapter:
        started = time.monotonic()
        await adapter.send(GROUP, "first")
        await adapter.send(GROUP, "second")
        elapsed = time.monotonic() - started
    assert [s.plain_text for s in fake.sent] == ["first", "second"]
    assert elapsed >= 1.0
    statuses = [c.status for c in fake.calls("sendMessage")]
    assert statuses == [429, 200, 200]


async def test_a_flood_to_one_group_is_paced_not_lost() -> None:
    async with FakeTelegram(flood_limit=(3, 1.0)) as fake, running(fake, Inbox()) as adapter:
        for i in range(6):
            await adapter.send(GROUP, f"message {i}")
    assert [s.plain_text for s in fake.sent] == [f"message {i}" for i in range(6)]
    assert any(c.status == 429 for c in fake.calls("sendMessage"))


async def test_a_persistent_flood_limit_raises_after_the_last_attempt(fake: FakeTelegram) -> None:
    fake.fail_next("sendMessage", 429, retry_after=1, times=5)
    adapter = make_adapter(fake, max_send_attempts=2)
    await adapter.start(Inbox())
    try:
        with pytest.raises(AdapterError, match="flood"):
            await adapter.send(DM, "never")
    finally:
        await adapter.stop()
    assert fake.sent == []
    assert len(fake.calls("sendMessage")) == 2


async def test_a_blocked_bot_raises_adapter_error(fake: FakeTelegram) -> None:
    fake.fail_next("sendMessage", 403)
    async with running(fake, Inbox()) as adapter:
        with pytest.raises(AdapterError, match="blocked"):
            await adapter.send(DM, "hello")


async def test_the_reply_points_at_the_inbound_message(fake: FakeTelegram) -> None:
    async with running(fake, Inbox()) as adapter:
        update = fake.push_message(42, "question", user_id=42)
        mid = update["message"]["message_id"]
        await adapter.send(OutboundTarget("telegram", "42", reply_to_message_id=f"42:{mid}"), "answer")
    [sent] = fake.sent
    assert sent.reply_parameters is not None
    assert sent.reply_parameters["message_id"] == mid


async def test_an_oversized_text_is_refused_not_split(fake: FakeTelegram) -> None:
    # Delivery splits a reply once (tests/gateway/outbound/test_delivery_split.py); a longer part
    # reaching the adapter is a caller's mistake, refused for good rather than split again.
    async with running(fake, Inbox()) as adapter:
        with pytest.raises(DeliveryRefused, match="over the limit of 4,096"):
            await adapter.send(DM, "🙂" * 2049)  # 2,049 code points, 4,098 UTF-16 units
        await adapter.send(DM, "🙂" * 2048)
    assert [utf16_len(s.text) for s in fake.sent] == [4096]


async def test_sending_before_start_raises_adapter_error(fake: FakeTelegram) -> None:
    adapter = make_adapter(fake)
    with pytest.raises(AdapterError):
        await adapter.send(DM, "too early")


async def test_typing_loop_refreshes_the_chat_action_until_the_block_ends(fake: FakeTelegram) -> None:
    async with running(fake, Inbox()) as adapter:
        async with adapter.typing_loop(OutboundTarget("telegram", "-100555", thread_id="9"), interval=0.05):
            await asyncio.sleep(0.25)
        count = len(fake.actions)
        await asyncio.sleep(0.15)
    assert count >= 3
    assert len(fake.actions) == count
    assert fake.actions[0]["action"] == "typing"
    assert fake.actions[0]["message_thread_id"] == 9


async def test_default_commands_are_registered_on_start(fake: FakeTelegram) -> None:
    async with running(fake, Inbox()):
        pass
    assert [(c["command"], c["description"]) for c in fake.commands] == list(DEFAULT_COMMANDS)


async def test_registered_commands_replace_the_menu_while_running(fake: FakeTelegram) -> None:
    async with running(fake, Inbox()) as adapter:
        await adapter.register_commands([("new", "Fresh start"), ("help", "Help")])
    assert [c["command"] for c in fake.commands] == ["new", "help"]


async def test_the_adapter_measures_in_utf16_units(fake: FakeTelegram) -> None:
    adapter = make_adapter(fake)
    assert adapter.text_limit == 4096
    assert adapter.measure("a🙂") == 3
