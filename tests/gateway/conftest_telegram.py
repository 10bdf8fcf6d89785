"""Helpers for the Telegram adapter tests (imported explicitly; not a pytest conftest)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from gateway.config import TelegramSettings
from gateway.platforms.base import InboundMessage, OutboundTarget
from gateway.platforms.telegram import TelegramAdapter
from tests.fakes.telegram import FakeTelegram

Reply = Callable[[InboundMessage], str | None]


class Inbox:
    """An in-test InboundHandler: records every message and, optionally, answers addressed ones."""

    def __init__(self, reply: Reply | None = None) -> None:
        self.messages: list[InboundMessage] = []
        self.adapter: TelegramAdapter | None = None
        self._reply = reply
        self.before: Callable[[InboundMessage], Awaitable[None]] | None = None

    async def __call__(self, message: InboundMessage) -> None:
        if self.before is not None:
            await self.before(message)
        self.messages.append(message)
        text = self._reply(message) if self._reply is not None else None
        if text is not None and self.adapter is not None:
            target = OutboundTarget(
                "telegram", message.chat_id, message.thread_id, message.platform_message_id
            )
            await self.adapter.send(target, text)

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[InboundMessage]:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while len(self.messages) < n:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {n} inbound messages (have {len(self.messages)})"
                )
            await asyncio.sleep(0.02)
        return list(self.messages)


def echo(message: InboundMessage) -> str | None:
    return f"echo: {message.text}" if message.addressed else None


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
