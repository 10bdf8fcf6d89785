"""Notes saved before compaction: the silent memory turn runs before every summary, on each trigger,
appends or edits and never overwrites, feeds the summary, and never stops a compaction by failing.

The real SDK against the fake Messages API, the real compressor and the InMemoryStore; the fake's
model answers a flush request by calling the memory tool as scripted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.engines.hooks import CompactHooks
from agent.memory_flush import FLUSH_SYSTEM, MemoryFlush
from agent.provider import LLMProvider
from agent.settings import CompressionSettings
from agent.types import Trigger
from tests.agent.loop_support import SUMMARY_MODEL, exchanges, rig
from tests.fakes.anthropic import Answer, error_reply, text_reply, tool_use_reply
from tests.fakes.memory_store import InMemoryStore

WINDOW = 20_000
SCOPE = "test:chat-1"
FACT = "- The launch code name is qv2."
TOO_LONG = "prompt is too long: 250000 tokens > 200000 maximum"


def is_flush(body: dict[str, Any]) -> bool:
    system = body.get("system") or []
    return any(FLUSH_SYSTEM in str(b.get("text", "")) for b in system)


class Flushes:
    """Answers flush requests: each flush runs ``calls`` (memory tool inputs) then says done."""

    def __init__(self, *calls: dict[str, Any], fail: Answer | None = None, delay: float = 0.0) -> None:
        self.calls = list(calls)
        self.fail = fail
        self.delay = delay
        self.bodies: list[dict[str, Any]] = []

    async def answer(self, body: dict[str, Any]) -> Answer:
        self.bodies.append(body)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            return self.fail
        last = body["messages"][-1]["content"]
        done = sum(1 for b in last if isinstance(b, dict) and b.get("type") == "tool_result")
        made = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if made < len(self.calls) and (made == 0 or done):
            return tool_use_reply("memory", self.calls[made])
        return text_reply("saved")


def flushing(
    flushes: Flushes, store: InMemoryStore, settings: CompressionSettings
) -> Callable[[LLMProvider], ContextCompressor]:
    def build(provider: LLMProvider) -> ContextCompressor:
        engine = ContextCompressor(settings, provider, summary_model=SUMMARY_MODEL)
        engine.hooks = CompactHooks(pre=[MemoryFlush(provider, store, settings).as_hook()])
        return engine

    return build


def route(r: Any, flushes: Flushes) -> None:
    """Flush requests to ``flushes``, the rest to the rig's script."""
    script = r.script

    async def responder(body: dict[str, Any]) -> Answer:
        if is_flush(body):
            return await flushes.answer(body)
        return script(body)

    r.fake.responder = responder


CREATE = {"command": "create", "path": "/memories/facts.md", "file_text": FACT + "\n"}


@pytest.mark.parametrize("trigger", ["hygiene", "in_loop", "reactive", "manual", "scheduled"])
async def test_the_flush_runs_before_the_summary_on_every_trigger(trigger: Trigger) -> None:
    store, settings, flushes = InMemoryStore(), CompressionSettings(), Flushes(CREATE)
    async with rig(context_window=WINDOW, store=store, engine=flushing(flushes, store, settings)) as r:
        route(r, flushes)
        await r.preload(exchanges(40, chars=600))
        result = await compact(r.loop._engine, store, r.session, trigger=trigger)
    assert result.record is not None
    assert flushes.bodies, "no flush request was made"
    note = await store.memory_get(SCOPE, "/memories/facts.md")
    assert note is not None and FACT in note.content
    # Its notes feed the summary: the summary request names what was saved.
    [summary] = r.script.summary_bodies
    assert "/memories/facts.md" in str(summary["messages"])
    # The flush saw the range about to be archived.
    assert re.search(r"question \d+:", str(flushes.bodies[0]["messages"]))


async def test_the_flush_runs_on_the_in_loop_and_reactive_paths_of_a_turn() -> None:
    store, settings, flushes = InMemoryStore(), CompressionSettings(), Flushes(CREATE)
    async with rig(context_window=WINDOW, store=store, engine=flushing(flushes, store, settings)) as r:
        route(r, flushes)
        await r.preload(exchanges(40, chars=600))
        r.script.add(error_reply(400, "invalid_request_error", TOO_LONG), text_reply("answered"))
        result = await r.turn("go on")
        compactions = await store.list_compactions(r.session.id)
    assert result.final_text == "answered"
    assert compactions and flushes.bodies
    assert len(flushes.bodies) >= len(compactions)
    assert await store.memory_get(SCOPE, "/memories/facts.md") is not None


async def test_no_flush_when_it_is_disabled() -> None:
    store, flushes = InMemoryStore(), Flushes(CREATE)
    settings = CompressionSettings(memory_flush=False)
    async with rig(context_window=WINDOW, store=store, engine=flushing(flushes, store, settings)) as r:
        route(r, flushes)
        await r.preload(exchanges(40, chars=600))
        result = await compact(r.loop._engine, store, r.session, trigger="manual")
    assert result.record is not None
    assert flushes.bodies == []
    assert await store.memory_get(SCOPE, "/memories/facts.md") is None


async def test_the_flush_never_overwrites_or_removes_a_note() -> None:
    store, settings = InMemoryStore(), CompressionSettings()
    await store.memory_put(SCOPE, "/memories/people.md", "- Ann likes tea.\n")
    flushes = Flushes(
        {"command": "create", "path": "/memories/people.md", "file_text": "- only this\n"},
        {"command": "delete", "path": "/memories/people.md"},
        {
            "command": "rename",
            "old_path": "/memories/people.md",
            "new_path": "/memories/gone.md",
            "path": "/memories/people.md",
        },
        {
            "command": "insert",
            "path": "/memories/people.md",
            "insert_line": 1,
            "insert_text": "- Bob likes coffee.",
        },
    )
    async with rig(context_window=WINDOW, store=store, engine=flushing(flushes, store, settings)) as r:
        route(r, flushes)
        await r.preload(exchanges(40, chars=600))
        await compact(r.loop._engine, store, r.session, trigger="manual")
    note = await store.memory_get(SCOPE, "/memories/people.md")
    assert note is not None
    assert note.content.splitlines() == ["- Ann likes tea.", "- Bob likes coffee."]
    assert await store.memory_get(SCOPE, "/memories/gone.md") is None
    last = flushes.bodies[-1]["messages"]
    refusals = [b for m in last for b in m["content"] if isinstance(b, dict) and b.get("is_error")]
    assert len(refusals) == 3


@pytest.mark.parametrize("how", ["error", "timeout"])
async def test_a_failing_flush_still_lets_the_compaction_run(how: str) -> None:
    store = InMemoryStore()
    settings = CompressionSettings(memory_flush_timeout_seconds=0.5)
    flushes = (
        Flushes(CREATE, fail=error_reply(500, "api_error", "Internal server error"))
        if how == "error"
        else Flushes(CREATE, delay=3.0)
    )
    async with rig(context_window=WINDOW, store=store, engine=flushing(flushes, store, settings)) as r:
        route(r, flushes)
        await r.preload(exchanges(40, chars=600))
        result = await compact(r.loop._engine, store, r.session, trigger="manual")
    assert flushes.bodies
    assert result.record is not None and result.record.messages_archived > 0
    assert len(r.script.summary_bodies) == 1
