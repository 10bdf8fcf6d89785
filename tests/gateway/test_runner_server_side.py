"""The service's engine, built from config, shapes requests with the server-side strategies."""

from __future__ import annotations

from agent.offline import OfflineProvider
from agent.provider import LLMRequest
from agent.types import AgentSession, ContextState
from gateway.config import load_settings
from gateway.runner import build_context_engine


def request() -> LLMRequest:
    return LLMRequest(model="claude-sonnet-4-6", messages=[{"role": "user", "content": "hi"}], max_tokens=64)


def session() -> AgentSession:
    return AgentSession("s1", "system", "claude-sonnet-4-6", 200_000)


def test_the_default_engine_sends_no_server_side_edit() -> None:
    engine = build_context_engine(load_settings(), OfflineProvider())
    shaped = engine.shape_request(session(), ContextState(), request())
    assert shaped.context_management is None and shaped.betas == ()


def test_configured_clearing_and_threshold_compaction_shape_every_request() -> None:
    settings = load_settings(compression={"server_clear_tool_uses": True, "server_compaction": "threshold"})
    engine = build_context_engine(settings, OfflineProvider())
    shaped = engine.shape_request(session(), ContextState(), request())
    assert shaped.context_management is not None
    assert [e["type"] for e in shaped.context_management["edits"]] == [
        "clear_tool_uses_20250919",
        "compact_20260112",
    ]
    assert set(shaped.betas) == {"context-management-2025-06-27", "compact-2026-01-12"}
