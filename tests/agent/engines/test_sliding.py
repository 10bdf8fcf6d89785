"""The ``sliding`` engine: no model call ever; oldest whole exchanges go to the archive behind a
deterministic note; every request stays valid (the fake server checks each one)."""

from __future__ import annotations

import pytest

from agent.compaction import compact
from agent.context_engine import ContextEngine
from agent.engines.registry import EngineDeps, build_engine
from agent.engines.sliding import NOTE_PREFIX, SlidingEngine
from agent.provider import LLMProvider
from agent.settings import CompressionSettings, ContextSettings
from agent.transcript import validate_messages
from agent.types import SearchFilters
from tests.agent.conftest import ScriptedSummarizer, conversation, persist
from tests.agent.loop_support import SUMMARY_MODEL, make_session, rig
from tests.fakes.anthropic import text_reply, tool_use_reply
from tests.fakes.memory_store import InMemoryStore

TURNS = 300


def sliding(provider: LLMProvider) -> ContextEngine:
    deps = EngineDeps(CompressionSettings(protect_last_n=4), provider, summary_model=SUMMARY_MODEL)
    return build_engine(ContextSettings(engine="sliding"), deps)


@pytest.mark.parametrize("turns", [pytest.param(TURNS, marks=pytest.mark.full), 60])
async def test_sliding_keeps_every_request_valid_over_300_turns_with_tools(turns: int) -> None:
    session = make_session(context_window=6_000)
    async with rig(session=session, engine=sliding) as r:
        for turn in range(turns):
            r.script.add(
                tool_use_reply("memory", {"command": "view", "path": "/memories"}, text="Looking."),
                text_reply(f"answer {turn}: " + "done and dusted " * 12),
            )
            result = await r.turn(f"request {turn}: " + "please check the notes again " * 8)
            assert result.final_text.startswith(f"answer {turn}")
        assert r.script.summary_bodies == []  # no model call for the context, ever
        assert len(r.script.chat_bodies) == 2 * turns
        await r.assert_valid()
        records = await r.store.list_compactions(session.id)
        assert records and {c.strategy for c in records} == {"sliding"}
        every = r.store.all_messages(session.id)
        stored_texts = [m.text for m in every if m.kind == "message" and m.role == "user"]
        assert any(t.startswith("request 0:") for t in stored_texts)  # nothing deleted
        active = await r.stored()
        assert active[0].text.startswith(NOTE_PREFIX)
        assert active[-1].text.startswith(f"answer {turns - 1}")


async def test_the_note_is_deterministic_and_points_at_recall() -> None:
    session = make_session("s1", context_window=8_000)
    texts = []
    for _ in range(2):
        store = InMemoryStore()
        store.add_session("s1")
        await persist(store, "s1", conversation(12, output_chars=600))
        engine = SlidingEngine(CompressionSettings())
        result = await compact(engine, store, session, trigger="in_loop")
        assert result.record is not None
        note = (await store.load_active("s1"))[0]
        texts.append(note.text.replace(result.record.id, "<id>"))
        assert f'recall {{"compaction_id": "{result.record.id}"}}' in note.text
        assert validate_messages(await store.load_active("s1")) == []
        hits = await store.search("Question", SearchFilters(session_id="s1", state="archived"))
        assert hits
    assert texts[0] == texts[1]


async def test_sliding_stands_in_for_the_summary_while_the_breaker_is_open() -> None:
    from datetime import timedelta

    from agent.engines.compressor.pipeline import CostOrderedCompressor

    summarizer = ScriptedSummarizer()
    engine = CostOrderedCompressor(
        CompressionSettings(protect_last_n=4),
        summarizer,
        summary_model=SUMMARY_MODEL,
        breaker_fallback="sliding",
    )
    store = InMemoryStore()
    session = make_session("s1", context_window=8_000)
    await persist(store, "s1", [m for m in conversation(14, output_chars=100)])
    state = await store.load_context_state("s1")
    state.consecutive_failures = 3
    state.cooldown_until = engine.clock() + timedelta(hours=1)
    await store.save_context_state("s1", state)
    result = await compact(engine, store, session, trigger="hygiene")
    assert [r.strategy for r in result.records][-1] == "sliding"
    assert summarizer.requests == []
