"""Helpers for the Telegram adapter tests (imported explicitly; not a pytest conftest)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from gateway.config import TelegramSettings
from gateway.platforms.telegram_bot.adapter import TelegramAdapter
from tests.fakes.telegram import FakeTelegram
from tests.gateway.inbox_recorder import Inbox


def make_adapter(fake: FakeTelegram, **settings: Any) -> TelegramAdapter:
    options = {"poll_timeout": 1, **settings}
    extra = {
        k: options.pop(k) for k in ("stop_grace", "max_text_file_bytes", "max_send_attempts") if k in options
    }
    return TelegramAdapter(fake.token, base_url=fake.root, settings=TelegramSettings(**options), **extra)


@asynccontextmanager
async def running(fake: FakeTelegram, inbox: Inbox, **settings: Any) -> AsyncIterator[TelegramAdapter]:
    adapter = make_adapter(fake, **settings)
    inbox.adapter = adapter
    await adapter.start(inbox)
    try:
        yield adapter
    finally:
        await adapter.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
