"""Cache diagnostics end to end: the fake API names each miss reason, the SQL store keeps it with
the call's usage, and it reaches the Prometheus counter and the admin session page, labelled with
our own part in it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import pytest

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.settings import CompressionSettings, LLMSettings, PromptCachingSettings
from agent.tools import ToolRegistry, default_registry
from agent.types import AgentSession, ChatMessage
from gateway.serving.sessions import agent_session_of
from gateway.store.repository import Store
from tests.agent.loop_support import exchanges
from tests.fakes.anthropic import FakeAnthropic
from tests.gateway.admin_support import admin_client

MODEL = "claude-sonnet-4-6"


@dataclass
class Chat:
    fake: FakeAnthropic
    store: Store
    loop: AgentLoop
    engine: ContextCompressor
    session: AgentSession

    async def say(self, text: str) -> None:
        await self.loop.run_turn(self.session, message=ChatMessage.user(text))


@asynccontextmanager
async def chat(store: Store) -> AsyncIterator[Chat]:
    info = await store.get_or_create_session(
        "test:dm:1", platform="test", chat_id="1", system_prompt="You are helpful.", model=MODEL
    )
    llm = LLMSettings(max_retries=0)
    async with FakeAnthropic() as fake:
        provider = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=llm)
        engine = ContextCompressor(CompressionSettings(), provider, summary_model="claude-haiku-4-5")
        loop = AgentLoop(
            provider, store, engine, llm=llm, caching=PromptCachingSettings(), tools=default_registry()
        )
        try:
            yield Chat(fake, store, loop, engine, agent_session_of(info, window=200_000, budget=None))
        finally:
            await provider.aclose()


async def _model(c: Chat) -> None:
    c.session = replace(c.session, model="claude-opus-4-8")


async def _system(c: Chat) -> None:
    c.session = replace(c.session, system_prompt="You are helpful. It is 12:00 now.")


async def _tools(c: Chat) -> None:
    c.loop.tools = ToolRegistry()


async def _compaction(c: Chat) -> None:
    for message in exchanges(20, chars=2000):
        await c.store.append_message(c.session.id, message)
    await c.say("one more before the compaction")
    done = await compact(c.engine, c.store, c.session, trigger="manual")
    assert done.record is not None


async def _forgotten(c: Chat) -> None:
    c.fake.diagnostics.forget()


async def _unavailable(c: Chat) -> None:
    c.fake.diagnostics.unavailable_next()


CASES: list[tuple[Callable[[Chat], Awaitable[None]], str, str, str]] = [
    (_model, "model_changed", "model", "true"),
    (_system, "system_changed", "none", "false"),
    (_tools, "tools_changed", "catalog", "true"),
    (_compaction, "messages_changed", "compaction", "true"),
    (_forgotten, "previous_message_not_found", "none", "false"),
    (_unavailable, "unavailable", "none", "false"),
]


@pytest.mark.parametrize(("change", "reason", "cause", "ours"), CASES, ids=[c[1] for c in CASES])
async def test_each_miss_reason_reaches_the_metrics_and_the_session_page(
    store: Store, change: Callable[[Chat], Awaitable[None]], reason: str, cause: str, ours: str
) -> None:
    async with chat(store) as c:
        await c.say("hello")
        await change(c)
        await c.say("and now?")
    async with admin_client(store) as client:
        metrics = (await client.get("/metrics")).text
        page = (await client.get(f"/sessions/{c.session.id}")).text

    assert c.fake.diagnostics.answered[-1] == reason
    assert f'hygieia_cache_misses_total{{cause="{cause}",ours="{ours}",reason="{reason}"}} 1.0' in metrics
    misses = page[page.index('<p class="cache">') :]
    assert f"<b>{reason}</b> · cause {cause}" in misses
    assert ("ours (expected)" if ours == "true" else "not ours (waste)") in misses


async def test_the_first_call_of_a_session_is_counted_as_a_new_session_miss_of_ours(store: Store) -> None:
    async with chat(store) as c:
        await c.say("hello " + "words " * 1500)  # past the smallest cacheable prefix: it writes the cache
        await c.say("again")
    async with admin_client(store) as client:
        metrics = (await client.get("/metrics")).text

    assert 'hygieia_cache_misses_total{cause="new_session",ours="true",reason="first_call"} 1.0' in metrics
    assert 'cause="none"' not in metrics


async def test_the_session_page_shows_the_cache_read_share(store: Store) -> None:
    async with chat(store) as c:
        await c.say("hello " + "words " * 1500)
        await c.say("again")
    async with admin_client(store) as client:
        page = (await client.get(f"/sessions/{c.session.id}")).text

    summary = await store.usage_summary(c.session.id)
    share = round(100 * summary.cache_read / (summary.input + summary.cache_write + summary.cache_read))
    assert summary.cache_read > 0
    assert f'<p class="cache">Cache read share {share}%' in page
