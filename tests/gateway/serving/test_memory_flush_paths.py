"""The memory flush on the gateway's own compaction paths, over the SQL store: hygiene before a
turn and the overnight sweep; and the service's engine carries the flush unless it is turned off."""

from __future__ import annotations

from typing import Any

from agent.engines.hooks import CompactHooks, Hook
from agent.memory_flush import FLUSH_SYSTEM, MemoryFlush
from agent.offline import OfflineProvider
from gateway.config import Settings
from gateway.runner import build_context_engine
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer, text_reply, tool_use_reply
from tests.gateway.conftest import Rig, gateway_rig
from tests.gateway.jobs.test_sweep import THREE_AM, WINDOW, session_at, sweep_of, triggers

FACT = "- Ann's sister is called Bea."
CREATE = {"command": "create", "path": "/memories/people.md", "file_text": FACT + "\n"}


def with_flush(rig: Rig) -> list[dict[str, Any]]:
    """The rig's engine with the flush hook; flush requests create the note once. Returns them."""
    rig.engine.hooks = CompactHooks(
        pre=[MemoryFlush(rig.provider, rig.store, rig.settings.compression).as_hook()]
    )
    seen: list[dict[str, Any]] = []
    respond = rig.responder

    async def answer(body: dict[str, Any]) -> Answer:
        if any(FLUSH_SYSTEM in str(b.get("text", "")) for b in body.get("system") or []):
            seen.append(body)
            made = any(m["role"] == "assistant" for m in body["messages"])
            return text_reply("saved") if made else tool_use_reply("memory", CREATE)
        return await respond(body)

    rig.fake.responder = answer
    return seen


async def test_the_overnight_sweep_flushes_notes_before_it_summarizes(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await session_at(rig, "idle-full", 0.9)
        flushes = with_flush(rig)
        await sweep_of(rig).run(THREE_AM)
        assert await triggers(rig, session) == ["scheduled"]
        note = await rig.store.memory_get(session.key, "/memories/people.md")
    assert flushes and note is not None and FACT in note.content
    assert rig.adapter.texts == []  # silent: nothing went to the chat


async def test_a_hygiene_compaction_flushes_notes_before_it_summarizes(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await session_at(rig, "busy", 0.9)
        flushes = with_flush(rig)
        await rig.say("hello again", chat_id="busy")
        await rig.settle()
        assert (await triggers(rig, session))[0] == "hygiene"
        note = await rig.store.memory_get(session.key, "/memories/people.md")
    assert flushes and note is not None
    assert rig.adapter.texts == ["reply: hello again"]  # the flush said nothing to the chat


def test_the_services_engine_flushes_unless_turned_off(store: Store) -> None:
    on = build_context_engine(Settings(), OfflineProvider(), store=store)
    off = build_context_engine(Settings(compression={"memory_flush": False}), OfflineProvider(), store=store)
    first = on.hooks.pre[0]
    assert isinstance(first, Hook) and isinstance(first.call, MemoryFlush)
    assert first.timeout_seconds == Settings().compression.memory_flush_timeout_seconds
    assert not any(isinstance(h, Hook) and isinstance(h.call, MemoryFlush) for h in off.hooks.pre)
