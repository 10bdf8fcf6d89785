"""Discord end to end: fake Discord -> adapter -> the real Gateway, agent and SQL store -> a Discord reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from agent.compressor import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.settings import LLMSettings
from agent.tools import default_registry
from gateway.delivery import Delivery
from gateway.dispatch import Gateway
from gateway.platforms.discord import DiscordAdapter
from gateway.runner import context_window_for, tool_tokens
from gateway.sessions import SessionDirectory
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.discord import FakeDiscord
from tests.gateway.conftest import ChatResponder, make_settings, user_texts
from tests.gateway.conftest_discord import DM_CHANNEL, dm, in_guild, make_adapter


@dataclass
class Stack:
    discord: FakeDiscord
    adapter: DiscordAdapter
    gateway: Gateway
    delivery: Delivery
    responder: ChatResponder

    async def settle(self, within: float = 20.0) -> None:
        await asyncio.wait_for(self.gateway.wait_idle(), within)
        await self.delivery.flush()


@asynccontextmanager
async def stack(store: Store) -> AsyncIterator[Stack]:
    """The runner's wiring in miniature, with Discord as the only platform."""
    settings = make_settings()
    responder = ChatResponder()
    async with FakeDiscord() as discord_fake, FakeAnthropic(responder=responder) as llm_fake:
        llm = LLMSettings(max_retries=0)
        provider = AnthropicProvider(api_key="test", base_url=llm_fake.base_url, settings=llm)
        engine = ContextCompressor(settings.compression, provider, summary_model=settings.summary_model)
        tools = default_registry()
        agent = AgentLoop(provider, store, engine, llm=llm, caching=settings.prompt_caching, tools=tools)
        adapter = make_adapter(discord_fake)
        delivery = Delivery(store, {adapter.name: adapter}, base_delay=0.01, poll_seconds=0.05)
        directory = SessionDirectory(
            store,
            settings.sessions,
            model=settings.model,
            context_window=lambda m: context_window_for(settings, m),
        )
        gateway = Gateway(
            settings=settings,
            store=store,
            agent=agent,
            engine=engine,
            delivery=delivery,
            directory=directory,
            tools=tools.definitions(),
            tool_tokens=tool_tokens(tools),
            retry_delays=(0.2, 0.4),
        )
        await delivery.start()
        await gateway.start()
        await adapter.start(gateway.intake)
        try:
            yield Stack(discord_fake, adapter, gateway, delivery, responder)
        finally:
            await adapter.stop()
            await gateway.stop(1.0)
            await delivery.stop()
            await provider.aclose()


async def test_a_dm_is_answered_on_discord_as_a_reply(store: Store) -> None:
    async with stack(store) as s:
        asked = dm(s.discord, "hello from discord")
        [sent] = await s.discord.wait_for_sent(1, timeout=20.0)
        await s.settle()
    assert sent.channel_id == DM_CHANNEL
    assert "hello from discord" in sent.content
    assert sent.message_reference is not None and str(sent.message_reference["message_id"]) == asked["id"]
    assert await store.current_session(f"discord:dm:{DM_CHANNEL}") is not None


async def test_ambient_guild_chatter_is_kept_but_only_the_mention_is_answered(store: Store) -> None:
    async with stack(store) as s:
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
