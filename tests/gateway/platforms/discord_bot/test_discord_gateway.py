"""Discord end to end: fake Discord -> adapter -> the real Gateway, agent and SQL store -> a Discord reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from gateway.runner import Service
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.discord import FakeDiscord
from tests.gateway.conftest import ChatResponder, make_settings, user_texts
from tests.gateway.discord_support import DM_CHANNEL, dm, in_guild, make_adapter


@dataclass
class Stack:
    discord: FakeDiscord
    service: Service
    responder: ChatResponder

    async def settle(self, within: float = 20.0) -> None:
        await asyncio.wait_for(self.service.gateway.wait_idle(), within)
        await self.service.delivery.flush()


@asynccontextmanager
async def stack(db_url: str, tmp_path: Path) -> AsyncIterator[Stack]:
    """The runner's own wiring (Service.build), with Discord as the only platform."""
    responder = ChatResponder()
    async with FakeDiscord() as discord_fake, FakeAnthropic(responder=responder) as llm_fake:
        settings = make_settings(
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=llm_fake.base_url,
            llm={"max_retries": 0},
            delivery={"streaming": False},  # each reply as one message; test_streaming.py streams
        )
        service = await Service.build(settings, [make_adapter(discord_fake)], migrate=False)
        await service.start()
        try:
            yield Stack(discord_fake, service, responder)
        finally:
            await service.stop()


async def test_a_dm_is_answered_on_discord_as_a_reply(db_url: str, tmp_path: Path, store: Store) -> None:
    async with stack(db_url, tmp_path) as s:
        asked = dm(s.discord, "hello from discord")
        [sent] = await s.discord.wait_for_sent(1, timeout=20.0)
        await s.settle()
    assert sent.channel_id == DM_CHANNEL
    assert "hello from discord" in sent.content
    assert sent.message_reference is not None and str(sent.message_reference["message_id"]) == asked["id"]
    assert await store.current_session(f"discord:dm:{DM_CHANNEL}") is not None


async def test_ambient_guild_chatter_is_kept_but_only_the_mention_is_answered(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    async with stack(db_url, tmp_path) as s:
        in_guild(s.discord, "background chatter")
        in_guild(s.discord, "what did I just say?", mentions_bot=True)
        [sent] = await s.discord.wait_for_sent(1, timeout=20.0)
        await s.settle()
        await asyncio.sleep(0.2)
    assert len(s.discord.sent) == 1
    assert sent.channel_id == s.discord.channel_id
    assert "what did I just say?" in sent.content
    [body] = s.responder.chat_bodies
    assert any("background chatter" in text for text in user_texts(body))  # ambient context reached the model
