"""Helpers for the Discord adapter tests (imported explicitly; not a pytest conftest)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from gateway.config import DiscordSettings
from gateway.platforms.base import InboundMessage, OutboundTarget
from gateway.platforms.discord import DiscordAdapter
from tests.fakes.discord import FakeDiscord

USER = 4_200_000_000_000_000_042
USER_NAME = "ann"
DM_CHANNEL = 4_200_000_000_000_000_500

Reply = Callable[[InboundMessage], str | None]


class Inbox:
    """An in-test InboundHandler: records every message and, optionally, answers addressed ones."""

    def __init__(self, reply: Reply | None = None) -> None:
        self.messages: list[InboundMessage] = []
        self.adapter: DiscordAdapter | None = None
        self.before: Callable[[InboundMessage], Awaitable[None]] | None = None
        self._reply = reply

    async def __call__(self, message: InboundMessage) -> None:
        if self.before is not None:
            await self.before(message)
        self.messages.append(message)
        text = self._reply(message) if self._reply is not None else None
        if text is not None and self.adapter is not None:
            target = OutboundTarget(
                "discord", message.chat_id, message.thread_id, message.platform_message_id
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


def make_adapter(
    fake: FakeDiscord, *, token: str | None = None, gateway: bool = True, **options: Any
) -> DiscordAdapter:
    settings = DiscordSettings(
        **{k: options.pop(k) for k in ("ambient", "shard_ids", "shard_count") if k in options}
    )
    options.setdefault("guild_ready_timeout", 0.05)
    options.setdefault("ready_timeout", 5.0)
    return DiscordAdapter(
        token if token is not None else fake.token,
        api_base=fake.api_base,
        gateway_url=fake.gateway_url if gateway else None,
        settings=settings,
        **options,
    )


@asynccontextmanager
async def running(
    fake: FakeDiscord, inbox: Inbox | None = None, **options: Any
) -> AsyncIterator[DiscordAdapter]:
    """A started adapter against ``fake`` delivering to ``inbox``; stopped on exit."""
    adapter = make_adapter(fake, **options)
    handler = inbox if inbox is not None else Inbox()
    handler.adapter = adapter
    await adapter.start(handler)
    try:
        yield adapter
    finally:
        await adapter.stop()


def dm(fake: FakeDiscord, content: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("author_id", USER)
    kw.setdefault("author_name", USER_NAME)
    return fake.push_message(kw.pop("channel_id", DM_CHANNEL), content, **kw)


def in_guild(fake: FakeDiscord, content: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("author_id", USER)
    kw.setdefault("author_name", USER_NAME)
    kw.setdefault("guild_id", fake.guild_id)
    return fake.push_message(kw.pop("channel_id", fake.channel_id), content, **kw)
