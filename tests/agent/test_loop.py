"""AgentLoop over the real SDK (AnthropicProvider) against the fake server, with the InMemoryStore."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.engines.compressor.engine import ContextCompressor
from agent.errors import ContextOverflow, Overloaded, StoreError
from agent.loop import CANCELLED_RESULT, MAX_TOKENS_RESULT, AgentLoop
from agent.offline import OfflineProvider
from agent.settings import CompressionSettings, LLMSettings
from agent.tools import FunctionTool, ToolContext, default_registry
from agent.types import ChatMessage, ContextState, UsageRecord
from tests.agent.loop_support import exchanges, make_session, rig
from tests.fakes.anthropic import Reply, error_reply, text_reply, tool_use_reply
from tests.fakes.memory_store import InMemoryStore

TOO_LONG = "prompt is too long: 250000 tokens > 200000 maximum"


def registry_with(*tools: FunctionTool) -> Any:
    registry = default_registry()
    for tool in tools:
        registry.register(tool)
    return registry


def results_of(message: ChatMessage) -> list[dict[str, Any]]:
    return [b for b in message.content if b.get("type") == "tool_result"]


async def test_a_plain_answer_ends_the_turn() -> None:
    async with rig() as r:
        r.script.add(text_reply("hello back"))
        result = await r.turn("hi")
        assert (result.final_text, result.stopped, result.iterations) == ("hello back", "end_turn", 1)
        assert [(m.role, m.text) for m in await r.stored()] == [("user", "hi"), ("assistant", "hello back")]


async def test_each_call_records_its_usage_and_cost() -> None:
    async with rig() as r:
        r.script.add(tool_use_reply("session_search", {"query": "x"}), text_reply("done"))
        result = await r.turn("hi")
        records = r.store.usage[r.session.id]
        assert [rec.purpose for rec in records] == ["chat", "chat"]
        assert all(rec.cost_usd > 0 for rec in records)
        assert [rec.usage for rec in records] == result.usages


class ReplyRefusingStore(InMemoryStore):
    """Stores everything but the model's reply (a database that fails at that moment)."""

    async def append_reply(
        self, session_id: str, message: ChatMessage, usage: UsageRecord, state: ContextState
    ) -> ChatMessage:
        raise StoreError("the database went away")


async def test_a_reply_that_could_not_be_stored_still_leaves_its_calls_usage() -> None:
    store = ReplyRefusingStore()
    async with rig(store=store) as r:
        r.script.add(text_reply("hello back"))
        with pytest.raises(StoreError):
            await r.turn("hi")
        assert [rec.purpose for rec in store.usage[r.session.id]] == ["chat"]
        assert (await store.load_context_state(r.session.id)).last_prompt_tokens


async def test_a_reply_with_no_content_records_its_calls_usage_alone() -> None:
    async with rig() as r:
        r.script.add(text_reply(""))
        await r.turn("hi")
        assert [m.role for m in await r.stored()] == ["user"]
        assert [rec.purpose for rec in r.store.usage[r.session.id]] == ["chat"]


async def test_state_keeps_the_last_calls_real_size_never_a_sum() -> None:
    async with rig() as r:
        r.script.add(tool_use_reply("session_search", {"query": "x"}), text_reply("done"))
        await r.turn("hi")
        state = await r.store.load_context_state(r.session.id)
        last = r.fake.usages[-1]
        assert state.last_prompt_tokens == (
            last["input_tokens"] + last["cache_creation_input_tokens"] + last["cache_read_input_tokens"]
        )
        assert state.last_prompt_estimate is not None  # what that real count counted, for growth


async def test_a_tool_round_is_stored_and_answered() -> None:
    async with rig() as r:
        (zebra,) = await r.preload([ChatMessage.user("remember the zebra named Otto")])
        await r.preload([ChatMessage.assistant("noted")])
        r.script.add(tool_use_reply("session_search", {"query": "zebra"}), text_reply("Otto, I found it"))
        result = await r.turn("what was the zebra called?")
        stored = await r.stored()
        assert [m.role for m in stored] == ["user", "assistant", "user", "assistant", "user", "assistant"]
        (block,) = results_of(stored[4])
        assert f"#{zebra.id} " in stored[4].text and "is_error" not in block
        assert result.final_text == "Otto, I found it"
        assert [m.id for m in result.messages] == [m.id for m in stored[3:]]
        await r.assert_valid()


async def test_system_prompt_and_tools_are_identical_in_every_request() -> None:
    async with rig() as r:
        r.script.add(tool_use_reply("session_search", {"query": "a"}), text_reply("one"))
        await r.turn("first")
        await r.turn("second")
        bodies = r.fake.message_requests
        assert len(bodies) == 3
        for body in bodies:
            assert body["system"][0]["text"] == r.session.system_prompt
            assert body["system"] == bodies[0]["system"]
            assert body["tools"] == bodies[0]["tools"]
        assert [t["name"] for t in bodies[0]["tools"]] == ["memory", "recall", "session_search"]


async def test_prompt_too_long_compacts_and_retries_once() -> None:
    async with rig() as r:
        await r.preload(exchanges(30))
        r.script.add(error_reply(400, "invalid_request_error", TOO_LONG), text_reply("fine now"))
        result = await r.turn("go on")
        assert result.final_text == "fine now"
        assert [c.trigger for c in result.compactions] == ["reactive"]
        assert r.script.log == ["chat", "summary", "chat"]
        first, retried = r.script.chat_bodies
        assert len(retried["messages"]) < len(first["messages"])
        await r.assert_valid()


async def test_a_second_overflow_is_raised() -> None:
    async with rig() as r:
        await r.preload(exchanges(30))
        r.script.add(*[error_reply(400, "invalid_request_error", TOO_LONG)] * 2)
        with pytest.raises(ContextOverflow):
            await r.turn("go on")
        await r.assert_valid()


async def test_preflight_compacts_a_history_over_the_threshold() -> None:
    async with rig(context_window=20_000) as r:
        await r.preload(exchanges(100))
        result = await r.turn("and now?")
        assert [c.trigger for c in result.compactions] == ["in_loop"]
        assert r.script.log == ["summary", "chat"]
        assert r.fake.counts["errors"] == 0


async def test_real_usage_over_the_threshold_after_a_tool_round_compacts() -> None:
    async with rig(context_window=20_000) as r:
        await r.preload(exchanges(90))
        # A wrong, low calibration: the estimate says "small", the real count says "over 50%".
        await r.store.save_context_state(
            r.session.id, ContextState(token_scale=0.25, token_scale_model=r.session.model)
        )
        r.script.add(tool_use_reply("session_search", {"query": "lorem"}), text_reply("done"))
        result = await r.turn("search please")
        first = r.fake.usages[0]
        assert (
            first["input_tokens"] + first["cache_creation_input_tokens"] + first["cache_read_input_tokens"]
            >= 10_000
        )
        assert r.script.log == ["chat", "summary", "chat"]
        assert [c.trigger for c in result.compactions] == ["in_loop"]
        await r.assert_valid()


async def test_a_tool_that_crashes_becomes_an_error_result_and_the_turn_goes_on() -> None:
    async def explode(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
        raise RuntimeError("disk on fire")

    tools = registry_with(FunctionTool("explode", "Fails.", {"type": "object"}, explode))
    async with rig(tools=tools) as r:
        r.script.add(tool_use_reply("explode", {}), text_reply("that tool is broken, sorry"))
        result = await r.turn("try it")
        assert result.final_text == "that tool is broken, sorry"
        stored = await r.stored()
        assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
        (block,) = results_of(stored[2])
        assert block["is_error"] and "RuntimeError" in block["content"]
        assert "disk on fire" not in block["content"]  # the model reads what failed, not internals
        await r.assert_valid()


async def test_a_failure_after_a_tool_round_keeps_everything_and_the_next_turn_works() -> None:
    async with rig() as r:
        r.script.add(tool_use_reply("session_search", {"query": "x"}), error_reply(500, "api_error", "boom"))
        with pytest.raises(Overloaded):
            await r.turn("search")
        stored = await r.stored()
        assert [m.role for m in stored] == ["user", "assistant", "user"]
        assert results_of(stored[-1])
        await r.assert_valid()
        r.script.add(text_reply("back again"))
        assert (await r.turn("hello?")).final_text == "back again"


async def test_cancel_mid_tool_stores_a_cancelled_result() -> None:
    started = asyncio.Event()

    async def hang(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    tools = registry_with(FunctionTool("hang", "Hangs.", {"type": "object"}, hang))
    async with rig(tools=tools) as r:
        r.script.add(tool_use_reply("hang", {}))
        task = asyncio.create_task(r.turn("wait for it"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        stored = await r.stored()
        (block,) = results_of(stored[-1])
        assert block["content"] == CANCELLED_RESULT and block["is_error"]
        await r.assert_valid()


class SlowToolUseStore(InMemoryStore):
    """Signals, then takes a while, when it stores an assistant message that calls tools."""

    def __init__(self) -> None:
        super().__init__()
        self.storing = asyncio.Event()

    async def append_message(self, session_id: str, message: ChatMessage) -> ChatMessage:
        if message.tool_use_ids():
            self.storing.set()
            await asyncio.sleep(0.05)
        return await super().append_message(session_id, message)


async def test_cancel_while_storing_a_tool_call_still_answers_it() -> None:
    store = SlowToolUseStore()
    async with rig(store=store) as r:
        r.script.add(tool_use_reply("session_search", {"query": "x"}))
        task = asyncio.create_task(r.turn("search"))
        await store.storing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        stored = await r.stored()
        assert [m.role for m in stored] == ["user", "assistant", "user"]
        (block,) = results_of(stored[-1])
        assert block["content"] == CANCELLED_RESULT
        await r.assert_valid()


async def test_memory_tool_writes_under_the_sessions_scope() -> None:
    async with rig() as r:
        create = {"command": "create", "path": "/memories/prefs.md", "file_text": "likes tea"}
        r.script.add(tool_use_reply("memory", create), text_reply("noted"))
        await r.turn("remember I like tea")
        entry = await r.store.memory_get(r.session.key, "/memories/prefs.md")
        assert entry is not None and entry.content == "likes tea"


async def test_the_iteration_cap_stops_the_turn() -> None:
    async with rig(llm=LLMSettings(max_retries=0, max_tool_iterations=3)) as r:
        r.script.add(*[tool_use_reply("session_search", {"query": f"q{i}"}) for i in range(5)])
        result = await r.turn("loop forever")
        assert result.stopped == "iteration_cap" and result.iterations == 3
        assert len(r.script.chat_bodies) == 3
        assert "stopped after 3 tool steps" in result.final_text
        await r.assert_valid()


async def test_long_tool_output_is_cut_with_a_note() -> None:
    async def big(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
        return "z" * 50_000

    tools = registry_with(FunctionTool("big", "Big.", {"type": "object"}, big))
    async with rig(tools=tools, llm=LLMSettings(max_retries=0, tool_output_cap_chars=1000)) as r:
        r.script.add(tool_use_reply("big", {}), text_reply("ok"))
        await r.turn("dump it")
        (block,) = results_of((await r.stored())[2])
        assert len(block["content"]) <= 1000
        assert "output truncated at" in block["content"] and "of 50000 chars" in block["content"]


async def test_long_recall_output_points_at_the_call_for_the_rest() -> None:
    async with rig(llm=LLMSettings(max_retries=0, tool_output_cap_chars=1000)) as r:
        await r.preload(exchanges(10, chars=400))
        r.script.add(error_reply(400, "invalid_request_error", TOO_LONG), text_reply("compacted"))
        await r.turn("compact first")
        (record,) = await r.store.list_compactions(r.session.id)
        r.script.add(tool_use_reply("recall", {"compaction_id": record.id}), text_reply("read it"))
        await r.turn("recall it")
        block = results_of((await r.stored())[-2])[0]
        # The hits shown whole travel as search_result blocks, the rest as text: within the cap together.
        texts = [b["text"] for b in block["content"] if b["type"] == "text"]
        texts += [
            c["text"] + b["title"]
            for b in block["content"]
            if b["type"] == "search_result"
            for c in b["content"]
        ]
        assert sum(len(t) for t in texts) <= 1000
        assert (
            f'call recall with {{"compaction_id": "{record.id}", "offset": ' in block["content"][-1]["text"]
        )


async def test_a_tool_call_cut_by_max_tokens_is_not_run() -> None:
    calls: list[dict[str, Any]] = []

    async def record(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
        calls.append(tool_input)
        return "ran"

    tools = registry_with(FunctionTool("note", "Notes.", {"type": "object"}, record))
    async with rig(tools=tools) as r:
        cut = tool_use_reply("note", {"text": "half"})
        r.script.add(Reply(cut.content, "max_tokens"), text_reply("retrying in short"))
        result = await r.turn("write a lot")
        assert calls == []
        (block,) = results_of((await r.stored())[2])
        assert block["content"] == MAX_TOKENS_RESULT
        assert result.final_text == "retrying in short"
        await r.assert_valid()


async def test_an_empty_answer_is_not_stored() -> None:
    async with rig() as r:
        r.script.add(Reply([], "end_turn"))
        result = await r.turn("say nothing")
        assert result.final_text == "" and [m.role for m in await r.stored()] == ["user"]


async def test_history_passed_in_is_used_instead_of_loading() -> None:
    async with rig() as r:
        stored = await r.preload([ChatMessage.user("only this")])
        await r.loop.run_turn(r.session, stored)
        assert r.fake.message_requests[0]["messages"][0]["content"][0]["text"] == "only this"


async def test_exact_counting_is_asked_only_near_the_threshold() -> None:
    async with rig(context_window=20_000, llm=LLMSettings(max_retries=0, exact_token_counting=True)) as r:
        await r.turn("hello")
        assert r.fake.counts["count_tokens"] == 0  # far below the threshold: the estimate is enough
        await r.preload(exchanges(100))
        result = await r.turn("and now?")
        assert r.fake.counts["count_tokens"] >= 1
        assert [c.trigger for c in result.compactions] == ["in_loop"]


async def test_an_unavailable_exact_count_falls_back_to_the_estimate() -> None:
    async with rig(context_window=20_000, llm=LLMSettings(max_retries=0, exact_token_counting=True)) as r:
        r.fake.count_tokens_enabled = False
        await r.preload(exchanges(100))
        result = await r.turn("and now?")
        assert [c.trigger for c in result.compactions] == ["in_loop"]
        assert r.script.log[-1] == "chat" and result.final_text


async def test_the_limit_the_api_reports_replaces_a_too_large_configured_window() -> None:
    # The operator configured 100k, but the model really takes 20k: the first overflow
    # teaches the session the real limit, and later turns compact before hitting it.
    async with rig(context_window=20_000, session=make_session(context_window=100_000)) as r:
        await r.preload(exchanges(60, chars=800))
        first = await r.turn("first question")
        assert [c.trigger for c in first.compactions] == ["reactive"]
        requests_before, answered_before = len(r.fake.message_requests), len(r.script.chat_bodies)
        await r.preload(exchanges(60, chars=800, start=100))
        second = await r.turn("second question")
        assert [c.trigger for c in second.compactions] == ["in_loop"]
        # The main model refused nothing: every chat call sent was answered. (The summary model,
        # narrowed to 20k by this fake too, learns nothing from the main model's limit.)
        sent = [b for b in r.fake.message_requests[requests_before:] if b["model"] == r.session.model]
        assert len(sent) == len(r.script.chat_bodies) - answered_before
        await r.assert_valid()


async def test_an_offline_turn_is_recorded_at_no_cost() -> None:
    store, provider = InMemoryStore(), OfflineProvider()
    session = make_session()
    store.add_session(session.id, platform="test", chat_id="c1")
    engine = ContextCompressor(CompressionSettings(), provider, summary_model="m")
    await AgentLoop(provider, store, engine).run_turn(session, message=ChatMessage.user("hello"))
    assert [u.cost_usd for u in store.usage[session.id]] == [0.0]
