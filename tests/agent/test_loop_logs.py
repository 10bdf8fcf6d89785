"""What a turn logs about compaction: a compaction once it happened, and nothing for a check
that changed nothing (a chat near its threshold would otherwise log twice a turn)."""

from __future__ import annotations

import logging

import pytest

from agent.engines.registry import EngineDeps, build_engine
from agent.loop import AgentLoop
from agent.offline import OfflineProvider
from agent.settings import CompressionSettings, ContextSettings, LLMSettings, PromptCachingSettings
from agent.tools import default_registry
from agent.types import ChatMessage
from tests.agent.loop_support import SUMMARY_MODEL, exchanges, make_session
from tests.fakes.memory_store import InMemoryStore

WINDOW = 4000


async def one_turn(history: list[ChatMessage]) -> InMemoryStore:
    """One offline turn over ``history`` in a ``WINDOW``-token session, on the default engine."""
    provider = OfflineProvider()
    store = InMemoryStore()
    engine = build_engine(ContextSettings(), EngineDeps(CompressionSettings(), provider, SUMMARY_MODEL))
    loop = AgentLoop(
        provider, store, engine, llm=LLMSettings(), caching=PromptCachingSettings(), tools=default_registry()
    )
    session = make_session(context_window=WINDOW)
    for message in history:
        await store.append_message(session.id, message)
    await loop.run_turn(session, message=ChatMessage.user("and now?"))
    return store


def agent_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("agent.")]


async def test_an_in_loop_check_that_compacts_nothing_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    # Over the prune mark (35% of the window) with no tool output and nothing old enough to
    # summarize: the check fires and every step declines.
    store = await one_turn(exchanges(3, chars=300))

    assert await store.list_compactions("s1") == []
    assert agent_lines(caplog) == []


async def test_compacting_is_logged_once_something_was_compacted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    store = await one_turn(exchanges(20, chars=200))

    [record] = await store.list_compactions("s1")
    lines = agent_lines(caplog)
    assert not any(line.startswith("compacting") for line in lines), lines
    assert [line for line in lines if line.startswith("compacted (in_loop)")] == [
        f"compacted (in_loop): {record.messages_archived} messages archived, "
        f"{record.tokens_before} -> {record.tokens_after} tokens"
    ]
