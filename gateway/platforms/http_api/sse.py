"""The answer's shapes: chat completions (whole, and chunks as server-sent events ending with
``data: [DONE]``) and responses, as OpenAI's clients parse them."""

from __future__ import annotations

import json
import time
from typing import Any

from gateway.platforms.http_api.errors import ApiError
from gateway.platforms.http_api.exchange import FinishReason

USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
"""Tokens are counted per turn by the gateway (the admin's usage page), not per request here."""
DONE = b"data: [DONE]\n\n"


def event(data: dict[str, Any], name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def error_event(error: ApiError) -> bytes:
    """A failure after the stream began (its status is already 200): the SDKs raise on it."""
    return event(dict(error.body()))


def chat_completion(answer_id: str, model: str, text: str, reason: FinishReason) -> dict[str, Any]:
    return {
        "id": answer_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": reason,
                "logprobs": None,
            }
        ],
        "usage": USAGE,
    }


def chat_chunk(
    answer_id: str,
    model: str,
    *,
    content: str | None = None,
    role: bool = False,
    reason: FinishReason | None = None,
) -> bytes:
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = "assistant"
    if content is not None:
        delta["content"] = content
    return event(
        {
            "id": answer_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}],
        }
    )


def response_body(
    response_id: str, model: str, conversation: str, text: str | None, *, reason: FinishReason | None = "stop"
) -> dict[str, Any]:
    """A ``/v1/responses`` answer; ``text`` None while it is being written (streaming)."""
    done = text is not None
    output: list[dict[str, Any]] = []
    if done:
        output.append(
            {
                "type": "message",
                "id": f"msg_{response_id[5:]}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    incomplete = reason == "content_filter"
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": ("incomplete" if incomplete else "completed") if done else "in_progress",
        "incomplete_details": {"reason": "content_filter"} if incomplete and done else None,
        "error": None,
        "model": model,
        "output": output,
        "conversation": {"id": conversation},
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
    }
