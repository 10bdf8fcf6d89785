"""Helpers for the Discord adapter tests (imported explicitly; not a pytest conftest)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from gateway.config import DiscordSettings
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from tests.fakes.discord import FakeDiscord
from tests.gateway.inbox_recorder import Inbox

USER = 4_200_000_000_000_000_042
USER_NAME = "ann"
DM_CHANNEL = 4_200_000_000_000_000_500


def make_adapter(
    fake: FakeDiscord, *, token: str | None = None, gateway: bool = True, **options: Any
) -> DiscordAdapter:
    options.setdefault("guild_ready_timeout", 0.05)  # the fake sends its guilds at once
    settings = DiscordSettings(
        **{k: options.pop(k) for k in list(options) if k in DiscordSettings.model_fields}
    )
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
