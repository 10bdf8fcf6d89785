"""Fail open: an engine that raises, hangs or plans something invalid is counted and the
built-in compressor serves that call; the turn is answered and no message is lost."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import pytest

from agent.context_engine import CompressionOutcome, ContextEngine
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.engines.failopen import FailOpen
from agent.offline import OfflineProvider
from agent.provider import LLMProvider, LLMRequest
from agent.server_context import CLEAR_TOOL_USES, CONTEXT_MANAGEMENT_BETA, ClearToolUsesEdit
from agent.settings import CompressionSettings
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage, CompactionPlan, ContextState, EngineFailure, Trigger
from tests.agent.conftest import conversation
from tests.agent.loop_support import SUMMARY_MODEL, make_session, rig

WINDOW = 20_000


class _AlwaysCompress(ContextEngine):
    name = "broken"

    def should_compress(
        self, session: AgentSession, state: ContextState, prompt_tokens: int, *, trigger: Trigger = "in_loop"
    ) -> bool:
        return prompt_tokens >= session.context_window // 2


class Raising(_AlwaysCompress):
    async def compress(
        self, session, messages, state, *, trigger, focus=None, prompt_tokens=None, memory_index=None
    ):  # type: ignore[no-untyped-def]
        raise RuntimeError("engine bug")


class Hanging(_AlwaysCompress):
    async def compress(
        self, session, messages, state, *, trigger, focus=None, prompt_tokens=None, memory_index=None
    ):  # type: ignore[no-untyped-def]
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


class SplitsAToolPair(_AlwaysCompress):
    """Archives an assistant tool_use message and keeps its tool_result."""

    async def compress(
        self, session, messages, state, *, trigger, focus=None, prompt_tokens=None, memory_index=None
    ):  # type: ignore[no-untyped-def]
        use = next(m for m in messages if m.tool_use_ids())
        assert use.id is not None
        plan = CompactionPlan(
            trigger=trigger,
            archive_ids=(use.id,),
            insertions=(),
            first_kept_id=None,
            tokens_before=10_000,
            tokens_after=9_000,
            model="",
            duration_ms=0,
            strategy="split",
        )
        return CompressionOutcome(plan, "ok", 10_000, 9_000)


class BadProjection(_AlwaysCompress):
    """Sends a view without the latest user message (a projection the validator refuses)."""

    async def compress(
        self, session, messages, state, *, trigger, focus=None, prompt_tokens=None, memory_index=None
    ):  # type: ignore[no-untyped-def]
        return CompressionOutcome(None, "failed", 0, 0, reason="nothing")

    def select_context(
        self, session: AgentSession, state: ContextState, messages: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        return list(messages[:2])


def guarded(primary: ContextEngine) -> object:
    def build(provider: LLMProvider) -> ContextEngine:
        fallback = CostOrderedCompressor(
            CompressionSettings(protect_last_n=4), provider, summary_model=SUMMARY_MODEL
        )
        return FailOpen(primary, fallback, timeout_seconds=0.5)

    return build


async def served_turn(primary: ContextEngine) -> tuple[dict[str, object], list[EngineFailure]]:
    async with rig(session=make_session(context_window=200_000), engine=guarded(primary)) as r:  # type: ignore[arg-type]
        await r.preload(conversation(3, output_chars=200))
        engine = r.loop._engine
        assert isinstance(engine, FailOpen)
        failures: list[EngineFailure] = []

        async def sink(session_id: str | None, failure: EngineFailure) -> None:
            failures.append(failure)

        engine.sink = sink  # type: ignore[assignment]
        result = await r.turn("the latest question")
        await asyncio.sleep(0)
        assert result.final_text == "ack: the latest question"
        return r.script.chat_bodies[-1], failures


@pytest.mark.parametrize(
    ("primary", "kind"),
    [(Raising(), "raised"), (Hanging(), "timeout"), (SplitsAToolPair(), "invalid")],
    ids=["raises", "hangs", "splits-a-tool-pair"],
)
async def test_a_failing_engine_is_served_by_the_built_in_and_nothing_is_lost(
    primary: ContextEngine, kind: str
) -> None:
    session = make_session(context_window=WINDOW)
    async with rig(session=session, engine=guarded(primary)) as r:  # type: ignore[arg-type]
        preloaded = await r.preload(conversation(20, output_chars=2000))
        engine = r.loop._engine
        assert isinstance(engine, FailOpen)
        captured: list[tuple[str | None, object]] = []

        async def sink(session_id: str | None, failure: object) -> None:
            captured.append((session_id, failure))

        engine.sink = sink  # type: ignore[assignment]
        result = await r.turn("and now?")
        assert result.final_text.startswith("ack")
        assert [c.strategy for c in result.compactions], "the built-in compacted"
        assert all(c.strategy in ("prune", "summary") for c in result.compactions)
        failures = [f for _, f in r.store.engine_failures]
        assert [(f.engine, f.kind) for f in failures] == [("broken", kind)]
        rows = {m.id: m for m in r.store.all_messages(session.id)}
        assert all(m.id in rows for m in preloaded)
        assert all(rows[m.id].active or rows[m.id].compacted for m in preloaded)
        assert validate_messages(await r.stored()) == []


async def test_an_invalid_projection_is_not_sent_and_is_counted() -> None:
    body, failures = await served_turn(BadProjection())
    sent = body["messages"]
    assert isinstance(sent, list) and len(sent) > 2
    assert [(f.operation, f.kind) for f in failures] == [("select_context", "invalid")]
    assert "latest user message" in failures[0].reason


CLEAR_EDIT: ClearToolUsesEdit = {
    "type": CLEAR_TOOL_USES,
    "trigger": {"type": "input_tokens", "value": 30_000},
    "keep": {"type": "tool_uses", "value": 3},
    "clear_at_least": {"type": "input_tokens", "value": 5_000},
    "clear_tool_inputs": False,
}


class _Shaper(_AlwaysCompress):
    async def compress(
        self, session, messages, state, *, trigger, focus=None, prompt_tokens=None, memory_index=None
    ):  # type: ignore[no-untyped-def]
        return CompressionOutcome(None, "failed", 0, 0, reason="nothing")


class AddsServerEdits(_Shaper):
    """A plugin whose only job is server-side: it asks the API to clear old tool results."""

    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        return dataclasses.replace(
            request,
            context_management={"edits": [CLEAR_EDIT]},
            betas=(*request.betas, CONTEXT_MANAGEMENT_BETA),
        )


class RaisesWhileShaping(_Shaper):
    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        raise RuntimeError("shaper bug")


class RewritesTheMessages(_Shaper):
    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        return dataclasses.replace(request, messages=request.messages[-1:])


async def test_a_plugins_server_side_edits_reach_the_api() -> None:
    body, failures = await served_turn(AddsServerEdits())
    assert body["context_management"] == {"edits": [CLEAR_EDIT]}
    assert failures == []


@pytest.mark.parametrize(
    ("primary", "kind"),
    [(RaisesWhileShaping(), "raised"), (RewritesTheMessages(), "invalid")],
    ids=["raises", "rewrites-the-messages"],
)
async def test_a_failing_request_shaper_is_counted_and_the_request_goes_out_whole(
    primary: ContextEngine, kind: str
) -> None:
    body, failures = await served_turn(primary)
    assert [(f.operation, f.kind) for f in failures] == [("shape_request", kind)]
    sent = body["messages"]
    assert isinstance(sent, list) and len(sent) > 1
    assert "context_management" not in body


ASKED = LLMRequest(
    model="claude-sonnet-5-5",
    messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    max_tokens=4096,
    temperature=0.5,
    thinking={"type": "adaptive"},
)


class Reshapes(_Shaper):
    def __init__(self, **changes: object) -> None:
        self.changes = changes

    def shape_request(self, session: AgentSession, state: ContextState, request: LLMRequest) -> LLMRequest:
        return dataclasses.replace(request, **self.changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [{"max_tokens": 1}, {"temperature": 2.0}, {"thinking": None}],
    ids=["max-tokens-4096-to-1", "temperature-0.5-to-2.0", "thinking-dropped"],
)
async def test_a_shaper_that_changes_the_answer_length_sampling_or_thinking_is_refused(
    changes: dict[str, object],
) -> None:
    fallback = CostOrderedCompressor(CompressionSettings(), OfflineProvider(), summary_model=SUMMARY_MODEL)
    failures: list[EngineFailure] = []

    async def sink(session_id: str | None, failure: EngineFailure) -> None:
        failures.append(failure)

    engine = FailOpen(Reshapes(**changes), fallback, timeout_seconds=0.5, sink=sink)
    sent = engine.shape_request(make_session(context_window=WINDOW), ContextState(), ASKED)
    await asyncio.sleep(0.05)
    assert (sent.max_tokens, sent.temperature, sent.thinking) == (4096, 0.5, {"type": "adaptive"})
    [failure] = failures
    assert (failure.operation, failure.kind) == ("shape_request", "invalid")
    assert next(iter(changes)) in failure.reason
