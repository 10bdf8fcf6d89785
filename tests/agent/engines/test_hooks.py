"""pre_compact / post_compact hooks: text the summary must keep, vetoes, failing hooks."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from agent.compaction import compact
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.engines.hooks import CompactHooks, PreCompact, PreCompactDecision, load_hooks
from agent.llm import AnthropicProvider
from agent.provider import LLMProvider
from agent.settings import CompressionSettings, LLMSettings
from agent.types import CompactionRecord
from tests.agent.engines import hook_funcs
from tests.agent.loop_support import SUMMARY_MODEL, exchanges, make_session, rig
from tests.fakes.anthropic import FakeAnthropic, is_summary_request
from tests.fakes.memory_store import InMemoryStore


def summary_prompts(fake: FakeAnthropic) -> list[str]:
    return [str(body["messages"]) for body in fake.message_requests if is_summary_request(body)]


async def compact_once(hooks: CompactHooks) -> tuple[FakeAnthropic, InMemoryStore, list[CompactionRecord]]:
    session = make_session(context_window=20_000)
    store = InMemoryStore()
    for m in exchanges(12, chars=400):
        await store.append_message(session.id, m)
    async with FakeAnthropic() as fake:
        provider = AnthropicProvider(api_key="t", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
        try:
            engine = CostOrderedCompressor(
                CompressionSettings(protect_last_n=4), provider, summary_model=SUMMARY_MODEL
            )
            engine.hooks = hooks
            result = await compact(engine, store, session, trigger="manual")
        finally:
            await provider.aclose()
    return fake, store, list(result.records)


async def test_text_a_config_hook_keeps_reaches_the_summary_request() -> None:
    hooks = load_hooks({"pre_compact": ["tests.agent.engines.hook_funcs:keep_rule"]})
    fake, _, records = await compact_once(hooks)
    assert records and records[0].strategy == "summary"
    prompts = summary_prompts(fake)
    assert len(prompts) == 1
    assert "RULE-42: invoices are always sent in EUR." in prompts[0]


async def test_a_post_compact_hook_gets_the_stored_record() -> None:
    hook_funcs.SEEN.clear()
    hooks = load_hooks({"post_compact": "tests.agent.engines.hook_funcs:remember"})
    _, store, records = await compact_once(hooks)
    assert records == hook_funcs.SEEN
    assert hook_funcs.SEEN[0].id == (await store.list_compactions("s1"))[0].id


async def test_hooks_register_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rules_hook_plugin.py").write_text(
        "def keep(event):\n    return 'RULE-7: never quote prices without VAT.'\n"
    )
    info = tmp_path / "rules_hook_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rules_hook_plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""
        [hygieia.hooks]
        pre_compact = rules_hook_plugin:keep
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fake, _, _ = await compact_once(load_hooks())
    assert "RULE-7: never quote prices without VAT." in summary_prompts(fake)[0]


async def test_a_raising_hook_is_skipped_and_the_others_run(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[CompactionRecord] = []

    def broken(event: PreCompact) -> str:
        raise RuntimeError("hook bug")

    def broken_post(record: CompactionRecord) -> None:
        raise RuntimeError("post hook bug")

    hooks = CompactHooks(pre=[broken, hook_funcs.keep_rule], post=[broken_post, seen.append])
    fake, _, records = await compact_once(hooks)
    assert records and seen == records
    assert "RULE-42" in summary_prompts(fake)[0]
    assert "pre_compact hook" in caplog.text and "post_compact hook" in caplog.text


def vetoing(events: list[PreCompact]) -> CompactHooks:
    def veto(event: PreCompact) -> PreCompactDecision:
        events.append(event)
        return PreCompactDecision(veto=True)

    return CompactHooks(pre=[veto])


def engine_with(hooks: CompactHooks) -> object:
    def build(provider: LLMProvider) -> CostOrderedCompressor:
        engine = CostOrderedCompressor(
            CompressionSettings(protect_last_n=4), provider, summary_model=SUMMARY_MODEL
        )
        engine.hooks = hooks
        return engine

    return build


async def test_a_veto_is_honoured_in_loop() -> None:
    events: list[PreCompact] = []
    async with rig(session=make_session(context_window=20_000), engine=engine_with(vetoing(events))) as r:  # type: ignore[arg-type]
        await r.preload(exchanges(30, chars=700))  # over the 50% threshold, well under the window
        result = await r.turn("go on")
        assert result.final_text == "ack: go on"
        assert [e.trigger for e in events] == ["in_loop"]
        assert events[0].overflow_imminent is False
        assert result.compactions == []
        assert r.script.summary_bodies == []
        assert await r.store.list_compactions(r.session.id) == []


async def test_a_veto_is_refused_when_the_window_would_overflow() -> None:
    events: list[PreCompact] = []
    async with rig(session=make_session(context_window=20_000), engine=engine_with(vetoing(events))) as r:  # type: ignore[arg-type]
        await r.preload(exchanges(52, chars=700))  # over 95% of the window: must shrink
        result = await r.turn("go on")
        assert result.final_text == "ack: go on"
        assert events and events[0].overflow_imminent is True
        assert [c.strategy for c in result.compactions] == ["summary"]
        assert len(r.script.summary_bodies) == 1


def test_engines_do_not_share_their_default_hooks() -> None:
    from agent.engines.sliding import SlidingEngine

    first, second = SlidingEngine(CompressionSettings()), SlidingEngine(CompressionSettings())
    first.hooks.pre.append(hook_funcs.keep_rule)
    assert second.hooks.pre == []
    assert first.hooks.pre == [hook_funcs.keep_rule]


async def test_an_in_loop_veto_rests_until_the_view_has_grown() -> None:
    """A vetoed in-loop compaction is not asked again at every tool step of the turn: the hook is
    called once, and again only when the view has grown (here: a big tool result)."""
    from tests.fakes.anthropic import text_reply, tool_use_reply

    events: list[PreCompact] = []
    async with rig(session=make_session(context_window=20_000), engine=engine_with(vetoing(events))) as r:  # type: ignore[arg-type]
        await r.preload(exchanges(30, chars=700))  # over the 50% threshold, well under the window
        r.script.add(*[tool_use_reply("session_search", {"query": f"q{i}"}) for i in range(4)])
        r.script.add(text_reply("done"))
        result = await r.turn("go on")
        assert result.final_text == "done"
        assert [e.trigger for e in events] == ["in_loop"]
        assert await r.store.list_compactions(r.session.id) == []


async def test_a_vetoed_compaction_is_asked_again_once_the_view_has_grown() -> None:
    events: list[PreCompact] = []
    async with rig(session=make_session(context_window=20_000), engine=engine_with(vetoing(events))) as r:  # type: ignore[arg-type]
        await r.preload(exchanges(30, chars=700))
        await r.turn("go on")
        await r.turn("a small follow-up")
        assert len(events) == 1  # the view barely grew: the same veto is not asked for again
        await r.turn("a long paste: " + "lorem ipsum dolor sit amet " * 200)  # ~12% more
        assert [e.trigger for e in events] == ["in_loop", "in_loop"]


@pytest.mark.parametrize(
    "hook",
    [hook_funcs.hangs, hook_funcs.hangs_in_a_thread, hook_funcs.cancels_itself],
    ids=["hangs", "hangs-in-a-thread", "cancels-itself"],
)
async def test_a_hook_that_never_returns_is_abandoned_at_its_limit_and_the_compaction_goes_on(
    hook: object, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[CompactionRecord] = []
    hooks = CompactHooks(pre=[hook, hook_funcs.keep_rule], post=[hook, seen.append], timeout_seconds=0.3)  # type: ignore[list-item]
    fake, _, records = await asyncio.wait_for(compact_once(hooks), 20)
    assert records and seen == records
    assert "RULE-42" in summary_prompts(fake)[0]
    failed = [r for r in caplog.records if r.name == "agent.engines.hooks"]
    assert [r.getMessage().split(" hook ")[0] for r in failed] == ["pre_compact", "post_compact"]


async def test_the_callers_own_cancellation_still_propagates_through_a_hanging_hook() -> None:
    hooks = CompactHooks(pre=[hook_funcs.hangs], timeout_seconds=60)
    task = asyncio.create_task(compact_once(hooks))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
