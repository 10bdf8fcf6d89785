"""A long reply is split once, by delivery, into parts each platform accepts.

The real python-telegram-bot and discord.py against their fake servers: a reply queued in the
outbox over the platform's limit arrives as several messages, each within the limit, together
the whole text, only the first quoting the message it answers. The adapters themselves refuse
an over-long text (tests/gateway/platforms/*/test_*_send.py) rather than split it again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gateway.outbound.delivery import Delivery
from gateway.platforms.base import PlatformAdapter
from gateway.splitter import join_parts, utf16_len
from gateway.store.repository import Store
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.discord_support import running as discord_running
from tests.gateway.inbox_recorder import Inbox
from tests.gateway.telegram_support import running as telegram_running

LONG = "\n\n".join(f"Paragraph {n}. " + "word 🙂 " * 120 for n in range(11))


async def _deliver(store: Store, adapter: PlatformAdapter, target: dict[str, Any], text: str) -> int:
    info = await store.get_or_create_session(
        f"{target['platform']}:dm:{target['chat_id']}",
        platform=target["platform"],
        chat_id=target["chat_id"],
        system_prompt="s",
        model="m",
    )
    row = await store.outbox_put(session_id=info.id, target=target, text=text, inbox_ids=[], message_id=None)
    now = datetime.now(UTC) + timedelta(seconds=1)
    delivery = Delivery(store, {adapter.name: adapter}, max_attempts=6, base_delay=2.0, clock=lambda: now)
    await delivery.flush()
    return row


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def discord_fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


async def test_a_long_reply_reaches_telegram_as_parts_it_accepts(
    store: Store, telegram: FakeTelegram
) -> None:
    assert utf16_len(LONG) > 2 * 4096
    async with telegram_running(telegram, Inbox()) as adapter:
        asked = telegram.push_message(42, "question", user_id=42)["message"]["message_id"]
        target = {
            "platform": "telegram",
            "chat_id": "42",
            "thread_id": None,
            "reply_to_message_id": f"42:{asked}",
        }
        row = await _deliver(store, adapter, target, LONG)
    assert (await store.outbox_get(row)).status == "sent"
    assert len(telegram.sent) == 3
    assert all(utf16_len(s.plain_text) <= 4096 for s in telegram.sent)
    assert join_parts([s.text for s in telegram.sent]) == LONG
    assert [s.reply_parameters is not None for s in telegram.sent] == [True, False, False]


async def test_a_long_reply_reaches_discord_as_parts_it_accepts(
    store: Store, discord_fake: FakeDiscord
) -> None:
    async with discord_running(discord_fake) as adapter:
        asked = discord_fake.push_message(
            discord_fake.channel_id, "q", author_id=1, author_name="ann", guild_id=discord_fake.guild_id
        )
        target = {
            "platform": "discord",
            "chat_id": str(discord_fake.channel_id),
            "thread_id": None,
            "reply_to_message_id": asked["id"],
        }
        row = await _deliver(store, adapter, target, LONG)
    assert (await store.outbox_get(row)).status == "sent"
    assert len(discord_fake.sent) > 3
    assert all(utf16_len(s.content) <= 2000 for s in discord_fake.sent)
    assert join_parts([s.content for s in discord_fake.sent]) == LONG
    assert [s.message_reference is not None for s in discord_fake.sent][:2] == [True, False]
    assert sum(s.message_reference is not None for s in discord_fake.sent) == 1
