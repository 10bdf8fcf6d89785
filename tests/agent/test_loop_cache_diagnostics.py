"""Cache diagnostics in the loop: every chat call names the session's previous response, the
miss reason the API returns is recorded with the call's usage, and our own prefix breaks are
labelled as ours."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.settings import CompressionSettings, LLMSettings, PromptCachingSettings
from agent.tools import ToolRegistry, default_registry
from agent.types import CacheCheck, ChatMessage
from tests.agent.loop_support import SUMMARY_MODEL, Rig, exchanges, make_session, rig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.memory_store import InMemoryStore

START = datetime(2026, 12, 1, 9, tzinfo=UTC)


def _checks(r: Rig) -> list[CacheCheck | None]:
    return [u.cache for u in r.store.usage[r.session.id] if u.purpose == "chat"]


def _previous_ids(r: Rig) -> list[str | None]:
    return [b["diagnostics"]["previous_message_id"] for b in r.script.chat_bodies]


async def test_the_first_call_sends_null_and_each_later_call_the_previous_response_id() -> None:
    async with rig() as r:
        await r.turn("hello")
        await r.turn("and again")
        await r.turn("once more")
        ids = r.fake.diagnostics.kept

    sent = _previous_ids(r)
    assert sent[0] is None
    assert sent[1] in ids and sent[2] in ids and sent[1] != sent[2]
    assert r.fake.diagnostics.answered == [None, None, None]
    assert "anthropic-beta" not in r.fake.requests[0].headers


async def test_a_session_first_call_is_a_new_session_miss_of_ours() -> None:
    async with rig() as r:
        await r.turn("hello " + "words " * 1500)  # past the model's smallest cacheable prefix
        await r.turn("again")

    first, second = _checks(r)
    assert first == CacheCheck(reason="first_call", missed_tokens=None, cause="new_session", ours=True)
    assert second == CacheCheck(reason=None, missed_tokens=None, cause="none", ours=False)


async def test_the_chain_survives_a_restart_of_the_loop() -> None:
    async with rig() as r:
        await r.turn("before the restart")
        llm = LLMSettings(max_retries=0)
        provider = AnthropicProvider(api_key="test", base_url=r.fake.base_url, settings=llm)
        try:
            engine = r.loop._engine  # the same engine: only the loop and its provider restart
            fresh = AgentLoop(provider, r.store, engine, llm=llm, caching=PromptCachingSettings())
            await fresh.run_turn(r.session, message=ChatMessage.user("after the restart"))
        finally:
            await provider.aclose()

    first_id = next(iter(r.fake.diagnostics.kept))
    assert _previous_ids(r) == [None, first_id]
    assert r.fake.diagnostics.answered == [None, None]


async def test_a_compaction_miss_is_messages_changed_and_labelled_ours() -> None:
    async with rig() as r:
        await r.preload(exchanges(20, chars=2000))
        await r.turn("before the compaction")
        done = await compact(r.loop._engine, r.store, r.session, trigger="manual")
        assert done.record is not None
        await r.turn("after the compaction")

    last = _checks(r)[-1]
    assert last is not None and last.reason == "messages_changed"
    assert (last.cause, last.ours) == ("compaction", True)
    assert last.missed_tokens is not None and last.missed_tokens > 0


async def test_a_lost_fingerprint_is_previous_message_not_found_and_not_ours() -> None:
    async with rig() as r:
        await r.turn("hello")
        r.fake.diagnostics.forget()
        await r.turn("again")

    assert _checks(r)[-1] == CacheCheck("previous_message_not_found", None, "none", False)


async def test_an_undiagnosable_call_is_unavailable() -> None:
    async with rig() as r:
        await r.turn("hello")
        r.fake.diagnostics.unavailable_next()
        await r.turn("again")

    assert _checks(r)[-1] == CacheCheck("unavailable", None, "none", False)


async def test_a_changed_tool_catalog_is_tools_changed_and_labelled_ours() -> None:
    async with rig(tools=ToolRegistry()) as r:
        await r.turn("hello")
        r.loop.tools = default_registry()
        await r.turn("again")

    last = _checks(r)[-1]
    assert last is not None and (last.reason, last.cause, last.ours) == ("tools_changed", "catalog", True)


async def test_another_model_is_model_changed_and_labelled_ours() -> None:
    async with rig() as r:
        await r.turn("hello")
        r.session = replace(r.session, model="claude-opus-4-8")
        await r.turn("again")

    last = _checks(r)[-1]
    assert last is not None and (last.reason, last.cause, last.ours) == ("model_changed", "model", True)


async def test_a_rewritten_system_prompt_is_system_changed_and_counted_as_waste() -> None:
    async with rig() as r:
        await r.turn("hello")
        r.session = replace(r.session, system_prompt="A new system prompt, with a timestamp 12:00.")
        await r.turn("again")

    last = _checks(r)[-1]
    assert last is not None and (last.reason, last.cause, last.ours) == ("system_changed", "none", False)


async def test_an_edited_earlier_message_is_messages_changed_and_counted_as_waste() -> None:
    async with rig() as r:
        await r.turn("hello")
        stored = await r.stored()
        edited = [replace(stored[0], content=[{"type": "text", "text": "hello, edited"}]), *stored[1:]]
        await r.loop.run_turn(r.session, edited, message=ChatMessage.user("again"))

    last = _checks(r)[-1]
    assert last is not None and (last.reason, last.cause, last.ours) == ("messages_changed", "none", False)


async def test_a_session_without_diagnostics_history_starts_a_new_chain() -> None:
    async with rig() as r:
        await r.turn("hello")
        other = make_session("s2", key="test:chat-2")
        await r.loop.run_turn(other, message=ChatMessage.user("first words"))

    assert _previous_ids(r) == [None, None]


@asynccontextmanager
async def timed() -> AsyncIterator[tuple[FakeAnthropic, AgentLoop, InMemoryStore, list[datetime]]]:
    """A loop and the fake's prompt cache on one hand-moved clock, caching with the 5-minute TTL."""
    now = [START]
    llm = LLMSettings(max_retries=0)
    async with FakeAnthropic(clock=lambda: (now[0] - START).total_seconds()) as fake:
        provider = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=llm)
        store = InMemoryStore()
        engine = ContextCompressor(CompressionSettings(), provider, summary_model=SUMMARY_MODEL)
        caching = PromptCachingSettings(cache_ttl="5m")
        loop = AgentLoop(provider, store, engine, llm=llm, caching=caching, clock=lambda: now[0])
        try:
            yield fake, loop, store, now
        finally:
            await provider.aclose()


async def test_a_prefix_that_outlived_the_ttl_we_chose_is_expired_and_labelled_ours() -> None:
    session = make_session()
    async with timed() as (_fake, loop, store, now):
        await loop.run_turn(session, message=ChatMessage.user("hello " + "words " * 1500))
        now[0] += timedelta(minutes=10)
        await loop.run_turn(session, message=ChatMessage.user("again"))

    assert store.usage[session.id][-1].cache == CacheCheck("expired", None, "ttl", True)


async def test_a_prefix_evicted_within_its_ttl_is_unread_and_counted_as_waste() -> None:
    session = make_session()
    async with timed() as (fake, loop, store, now):
        await loop.run_turn(session, message=ChatMessage.user("hello " + "words " * 1500))
        now[0] += timedelta(minutes=2)
        fake.cache.clear()
        await loop.run_turn(session, message=ChatMessage.user("again"))

    assert store.usage[session.id][-1].cache == CacheCheck("unread", None, "none", False)
