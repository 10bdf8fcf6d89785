"""The default engine's strategies: cheapest first, stopping once under target; prune on its own
trigger and on a cold cache with no model call; snip archives exactly what was named."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from agent.compaction import compact, forget
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.engines.compressor.prune import PRUNED_MARK
from agent.engines.strategies.snip import SnipRefused
from agent.provider import LLMProvider
from agent.settings import CompressionSettings
from agent.transcript import validate_messages
from agent.types import ChatMessage, SearchFilters
from tests.agent.conftest import (
    FakeClock,
    ScriptedSummarizer,
    assistant,
    conversation,
    persist,
    tool_round,
    user,
)
from tests.agent.loop_support import SUMMARY_MODEL, exchanges, make_session, rig
from tests.fakes.memory_store import InMemoryStore
from tests.media_files import picture

WINDOW = 20_000


def pipeline(settings: CompressionSettings | None = None) -> object:
    def build(provider: LLMProvider) -> CostOrderedCompressor:
        return CostOrderedCompressor(
            settings or CompressionSettings(protect_last_n=4), provider, summary_model=SUMMARY_MODEL
        )

    return build


async def test_below_the_summary_threshold_prune_alone_runs_and_makes_no_model_call() -> None:
    async with rig(session=make_session(context_window=WINDOW), engine=pipeline()) as r:  # type: ignore[arg-type]
        await r.preload(conversation(8, output_chars=3000))  # ~8k tokens: over prune_at (7k), under 10k
        result = await r.turn("what next?")
        assert [c.strategy for c in result.compactions] == ["prune"]
        assert r.script.summary_bodies == []
        assert r.script.log == ["chat"]
        assert PRUNED_MARK in str(r.script.chat_bodies[0]["messages"])
        await r.assert_valid()


async def test_at_the_threshold_prune_that_gets_under_target_stops_the_pipeline() -> None:
    async with rig(session=make_session(context_window=WINDOW), engine=pipeline()) as r:  # type: ignore[arg-type]
        await r.preload(conversation(10, output_chars=4500))  # ~12k tokens, mostly old tool output
        result = await r.turn("what next?")
        assert [c.strategy for c in result.compactions] == ["prune"]
        assert result.compactions[0].tokens_after <= 0.6 * 0.5 * WINDOW
        assert r.script.summary_bodies == []


async def test_when_prune_is_not_enough_the_summary_runs_after_it() -> None:
    async with rig(session=make_session(context_window=WINDOW), engine=pipeline()) as r:  # type: ignore[arg-type]
        history: list[ChatMessage] = []
        for i in range(12):
            history += [user(f"question {i} " + "words " * 250)]
            history += tool_round(["x" * 1500])
            history += [assistant(f"answer {i} " + "words " * 250)]
        await r.preload(history)
        result = await r.turn("what next?")
        strategies = [c.strategy for c in result.compactions]
        assert strategies == ["prune", "summary"]
        freed = [c.tokens_before - c.tokens_after for c in result.compactions]
        assert all(f > 0 for f in freed)
        assert len(r.script.summary_bodies) == 1
        await r.assert_valid()


async def age_last_call(store: InMemoryStore, session_id: str, seconds: float) -> None:
    state = await store.load_context_state(session_id)
    assert state.last_prompt_at is not None
    state.last_prompt_at -= timedelta(seconds=seconds)
    await store.save_context_state(session_id, state)


COLD = CompressionSettings(
    protect_last_n=4,
    cold_prune_min_tokens=1000,
    strategies=["snip", "cold_prune", "prune", "summary", "reactive"],
)


async def test_a_cold_cache_prunes_old_tool_output_below_prune_at() -> None:
    async with rig(session=make_session(context_window=WINDOW), engine=pipeline(COLD)) as r:  # type: ignore[arg-type]
        await r.preload(conversation(4, output_chars=3000))  # ~4k tokens: far under prune_at
        first = await r.turn("first")
        assert first.compactions == []
        await age_last_call(r.store, r.session.id, 301)  # past the 5-minute cache TTL
        second = await r.turn("second")
        assert [c.strategy for c in second.compactions] == ["cold_prune"]
        assert r.script.summary_bodies == []


async def test_a_warm_cache_is_left_alone_below_prune_at() -> None:
    async with rig(session=make_session(context_window=WINDOW), engine=pipeline(COLD)) as r:  # type: ignore[arg-type]
        await r.preload(conversation(4, output_chars=3000))
        await r.turn("first")
        await age_last_call(r.store, r.session.id, 60)
        second = await r.turn("second")
        assert second.compactions == []


# ---- snip ------------------------------------------------------------------------------------


async def stored_session() -> tuple[InMemoryStore, CostOrderedCompressor, list[ChatMessage]]:
    store = InMemoryStore()
    store.add_session("s1", platform="test", chat_id="c1")
    saved = await persist(store, "s1", exchanges(6, chars=80))
    engine = CostOrderedCompressor(CompressionSettings(), ScriptedSummarizer(), summary_model=SUMMARY_MODEL)
    return store, engine, saved


async def test_snip_archives_exactly_the_named_range_and_restore_brings_it_back() -> None:
    store, engine, saved = await stored_session()
    session = make_session("s1")
    named = saved[4:8]
    assert named[0].id is not None and named[-1].id is not None
    result = await forget(engine, store, session, from_id=named[0].id, to_id=named[-1].id)
    record = result.record
    assert record is not None and record.strategy == "snip" and record.trigger == "manual"
    archived = [m for m in store.all_messages("s1") if m.compacted]
    assert [m.id for m in archived] == [m.id for m in named]
    active = await store.load_active("s1")
    assert [m.id for m in active if m.kind == "message"] == [m.id for m in saved[:4] + saved[8:]]
    assert validate_messages(active) == []
    hits = await store.search("question", SearchFilters(session_id="s1", state="archived"))
    assert {h.message_id for h in hits} >= {named[0].id}
    page = await store.recall("s1", compaction_id=record.id)
    assert [m.id for m in page.messages] == [m.id for m in named]
    await store.restore_latest_compaction("s1")
    assert [m.id for m in await store.load_active("s1")] == [m.id for m in saved]


async def test_forget_n_archives_the_last_n_exchanges() -> None:
    store, engine, saved = await stored_session()
    result = await forget(engine, store, make_session("s1"), last=2)
    assert result.record is not None and result.record.messages_archived == 4
    assert [m.id for m in store.all_messages("s1") if m.compacted] == [m.id for m in saved[-4:]]


async def test_snip_refuses_a_range_that_splits_a_tool_call_from_its_result() -> None:
    store = InMemoryStore()
    saved = await persist(store, "s1", [user("hi"), *tool_round(["out"]), assistant("done")])
    engine = CostOrderedCompressor(CompressionSettings(), ScriptedSummarizer(), summary_model=SUMMARY_MODEL)
    use = saved[1]
    assert use.id is not None
    with pytest.raises(SnipRefused):
        await forget(engine, store, make_session("s1"), from_id=use.id, to_id=use.id)
    assert all(m.active for m in store.all_messages("s1"))


async def test_manual_compaction_is_still_the_summary() -> None:
    store, engine, _ = await stored_session()
    await persist(store, "s1", exchanges(20, chars=400, start=6))
    result = await compact(engine, store, make_session("s1", context_window=8_000), trigger="manual")
    assert [r.strategy for r in result.records] == ["summary"]


def test_the_cold_window_follows_the_cache_ttl() -> None:
    clock = FakeClock()
    engine = CostOrderedCompressor(
        CompressionSettings(),
        ScriptedSummarizer(),
        summary_model=SUMMARY_MODEL,
        clock=clock,
        cache_ttl_seconds=3600,
    )
    from agent.types import ContextState

    state = ContextState(last_prompt_at=clock() - timedelta(seconds=1800))
    assert engine.cold(state) is False
    clock.advance(1801)
    assert engine.cold(state) is True


async def test_prompt_too_long_is_served_by_the_cheapest_strategy_that_frees_enough_then_one_retry() -> None:
    # The session thinks its window is large; the API's is 12,000 tokens and says so.
    session = make_session(context_window=200_000)
    async with rig(session=session, context_window=12_000, engine=pipeline()) as r:  # type: ignore[arg-type]
        await r.preload(conversation(8, output_chars=6000))  # ~14k tokens, mostly old tool output
        result = await r.turn("what next?")
        assert result.final_text == "ack: what next?"
        assert [c.strategy for c in result.compactions] == ["prune"]
        assert [c.trigger for c in result.compactions] == ["reactive"]
        assert r.script.summary_bodies == []
        await r.assert_valid()


async def test_an_in_loop_estimate_over_the_window_prunes_a_picture_and_keeps_the_protected_head() -> None:
    # The real count says far more than the estimate (what a prompt with a picture can do): after
    # the prune the estimate is still over the window, with no middle to summarize. The picture's
    # one-line placeholder must stay in the view, not be dropped with its exchange.
    store = InMemoryStore()
    store.add_session("s1", platform="test", chat_id="c1")
    data = base64.b64encode(picture(800, 600)).decode()
    photo = ChatMessage(
        role="user",
        content=[
            {"type": "text", "text": "my cat"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": data}},
        ],
    )
    saved = await persist(store, "s1", [photo, assistant("a cat"), user("and now?")])
    engine = CostOrderedCompressor(
        CompressionSettings(protect_first_n=1, protect_last_n=2),
        ScriptedSummarizer(),
        summary_model=SUMMARY_MODEL,
    )
    session = make_session("s1", context_window=8_000)
    result = await compact(engine, store, session, trigger="in_loop", prompt_tokens=100_000)
    assert [r.strategy for r in result.records] == ["prune"]
    active = await store.load_active("s1")
    placeholder = f'recall {{"from_id": {saved[0].id}, "to_id": {saved[0].id}}} shows it again'
    assert placeholder in active[0].text and [m.kind for m in active] == ["message"] * 3
