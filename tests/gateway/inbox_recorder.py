"""An in-test InboundHandler shared by the adapter tests (imported explicitly; not a pytest conftest)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from gateway.platforms.base import InboundMessage, OutboundTarget, PlatformAdapter

Reply = Callable[[InboundMessage], str | None]


class Inbox:
    """Records every message and, optionally, answers addressed ones through ``adapter``."""

    def __init__(self, reply: Reply | None = None) -> None:
        self.messages: list[InboundMessage] = []
        self.adapter: PlatformAdapter | None = None
        self.before: Callable[[InboundMessage], Awaitable[None]] | None = None
        self._reply = reply

    async def __call__(self, message: InboundMessage) -> None:
        if self.before is not None:
            await self.before(message)
        self.messages.append(message)
        text = self._reply(message) if self._reply is not None else None
        if text is not None and self.adapter is not None:
            target = OutboundTarget(
                message.platform, message.chat_id, message.thread_id, message.platform_message_id
            )
            await self.adapter.send(target, text)

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[InboundMessage]:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while len(self.messages) < n:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {n} inbound messages (have {len(self.messages)})"
                )
            await asyncio.sleep(0.01)
        return list(self.messages)


def echo(message: InboundMessage) -> str | None:
    return f"echo: {message.text}" if message.addressed else None
