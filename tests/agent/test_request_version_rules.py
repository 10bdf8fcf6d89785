"""The requests our real builder makes never trip what API version 2026-10-21 refuses, whatever
the transcript holds: recall hits as search_result blocks, documents, images, tool rounds, cited
answers, and rows an import or a paste left with citations in a user turn."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.llm import AnthropicProvider
from agent.loop_request import build_request
from agent.provider import LLMRequest
from agent.request_memo import RequestMemo
from agent.types import AgentSession, ChatMessage
from tests.fakes.anthropic import request_problems
from tests.media_files import picture

TOOLS = [{"name": "recall", "description": "search the archive", "input_schema": {"type": "object"}}]
MODELS = ("claude-sonnet-4-6", "claude-sonnet-5-5", "claude-fable-5-1", "claude-fable-5-2", "claude-3-haiku")
JPEG = base64.b64encode(picture(16, 16)).decode()
CITATION = {
    "type": "search_result_location",
    "source": "hygieia://session/s/message/3",
    "title": "#3 user",
    "cited_text": "the orange kayak",
    "search_result_index": 0,
    "start_block_index": 0,
    "end_block_index": 1,
}


def _hit(n: int, cited_inside: bool) -> dict[str, Any]:
    inner: dict[str, Any] = {"type": "text", "text": f"hit {n}: the orange kayak"}
    if cited_inside:
        inner["citations"] = [CITATION]
    return {
        "type": "search_result",
        "source": f"hygieia://session/s/message/{n}",
        "title": f"#{n} user",
        "content": [inner],
        "citations": {"enabled": True},
    }


def _turn(kind: str, n: int) -> list[ChatMessage]:
    if kind == "text":
        return [ChatMessage.user(f"question {n}"), ChatMessage.assistant(f"answer {n}")]
    if kind == "image":
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": JPEG}}
        return [
            ChatMessage(role="user", content=[image, {"type": "text", "text": "what is it?"}]),
            ChatMessage.assistant("a square"),
        ]
    if kind == "document":
        doc = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": f"notes {n}"},
        }
        return [
            ChatMessage(role="user", content=[doc, {"type": "text", "text": "summarize"}]),
            ChatMessage.assistant("notes"),
        ]
    if kind in ("recall", "recall_cited_inside"):
        use = {"type": "tool_use", "id": f"u{n}", "name": "recall", "input": {"q": "kayak"}}
        result = {
            "type": "tool_result",
            "tool_use_id": f"u{n}",
            "content": [{"type": "text", "text": "1 match"}, _hit(n, kind == "recall_cited_inside")],
        }
        cited = {"type": "text", "text": "You picked the orange kayak.", "citations": [CITATION]}
        return [
            ChatMessage.user("which kayak?"),
            ChatMessage(role="assistant", content=[use]),
            ChatMessage(role="user", content=[result]),
            ChatMessage(role="assistant", content=[cited]),
        ]
    if kind == "pasted_answer":  # an assistant's cited answer stored as a user turn
        pasted = {"type": "text", "text": "as you said", "citations": [CITATION]}
        return [ChatMessage(role="user", content=[pasted]), ChatMessage.assistant("yes")]
    if kind == "assistant_document":  # an imported transcript's assistant attachment
        doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}
        return [ChatMessage.user("send it"), ChatMessage(role="assistant", content=[doc])]
    raise AssertionError(kind)


KINDS = ("text", "image", "document", "recall", "recall_cited_inside", "pasted_answer", "assistant_document")


def _body(request: LLMRequest) -> dict[str, Any]:
    params = AnthropicProvider._call_params(request)
    extra = params.pop("extra_body", {}) or {}
    params.pop("betas", None)
    return {**params, **extra}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=8),
    model=st.sampled_from(MODELS),
    ttl=st.sampled_from([None, "5m", "1h"]),
    automatic=st.booleans(),
    memo=st.booleans(),
    temperature=st.sampled_from([None, 0.3]),
)
def test_a_request_built_from_any_transcript_passes_the_2026_10_21_rules(
    kinds: list[str], model: str, ttl: str | None, automatic: bool, memo: bool, temperature: float | None
) -> None:
    view = [m for n, kind in enumerate(kinds) for m in _turn(kind, n)]
    view.append(ChatMessage.user("and now?"))
    session = AgentSession(id="s", system_prompt="be brief", model=model, context_window=200_000)
    request, _ = build_request(
        session,
        view,
        TOOLS,
        max_tokens=1024,
        cache_ttl=ttl,
        automatic_cache=automatic,
        memo=RequestMemo() if memo else None,
    )
    problems = request_problems(_body(LLMRequest(**{**vars_of(request), "temperature": temperature})))
    assert problems == []


def vars_of(request: LLMRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in request.__dataclass_fields__}
