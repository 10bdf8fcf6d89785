"""Server-sent events for the fake Anthropic API (``"stream": true``), as the real API sends them.

``message_start`` (the message with empty content, input usage, ``output_tokens`` 1), a
``ping``, then per content block ``content_block_start`` / ``content_block_delta``
(``text_delta`` pieces, or ``input_json_delta`` pieces of the tool input's JSON) /
``content_block_stop``, then ``message_delta`` (``stop_reason``, output usage) and
``message_stop``. Each event is ``event: <type>`` + ``data: <json>`` + a blank line.

:class:`Pacing` spaces the deltas like a model writing (``chunk_chars`` per delta every
``delay`` seconds); :class:`Break` makes a stream fail midway: an ``error`` event (what the
API sends when it is overloaded mid-answer) or a dropped connection.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web


@dataclass(frozen=True, slots=True)
class Pacing:
    """How text is cut into deltas and how fast they come (0 delay: as fast as possible)."""

    chunk_chars: int = 12
    delay: float = 0.0
    first_delay: float = 0.0
    """Time before the first content event (the model "thinking" before it writes)."""


@dataclass(frozen=True, slots=True)
class Break:
    """Fail the stream after ``after_deltas`` content deltas."""

    after_deltas: int
    how: Literal["error", "drop"] = "error"
    error_type: str = "overloaded_error"
    message: str = "Overloaded"


def generation_seconds(message: dict[str, Any], pacing: Pacing) -> float:
    """How long the same answer takes when it is not streamed: the model writes it all the same."""
    deltas = sum(1 for _, is_delta in events(message, pacing) if is_delta)
    return pacing.first_delay + max(0, deltas - 1) * pacing.delay if deltas else 0.0


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))] or [""]


def events(message: dict[str, Any], pacing: Pacing) -> list[tuple[bytes, bool]]:
    """The events of ``message`` (a complete Messages API response), each flagged when it is a delta."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    # message_start carries provisional figures; message_delta the final, cumulative ones
    # (a client must take its cache figures from the latter).
    start["usage"] = {
        "input_tokens": usage["input_tokens"],
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    start.pop("context_management", None)
    out: list[tuple[bytes, bool]] = [
        (_event("message_start", {"message": start}), False),
        (_event("ping", {}), False),
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], pacing.chunk_chars)]
        elif block["type"] == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p}
                for p in _pieces(block["thinking"], pacing.chunk_chars)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] in ("tool_use", "server_tool_use"):
            opened = {"type": block["type"], "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, pacing.chunk_chars)
            ]
        elif block["type"] == "compaction" and "signature" not in block:
            # A threshold block: opened empty, its whole content in one compaction_delta.
            opened = {"type": "compaction", "content": None}
            deltas = [{"type": "compaction_delta", "content": block["content"]}]
        else:
            # Anything else (an on-demand compaction block among them) arrives whole in its start.
            opened, deltas = block, []
        out.append((_event("content_block_start", {"index": index, "content_block": opened}), False))
        out.extend((_event("content_block_delta", {"index": index, "delta": d}), True) for d in deltas)
        out.append((_event("content_block_stop", {"index": index}), False))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    if "stop_details" in message:
        delta["stop_details"] = message["stop_details"]
    final: dict[str, Any] = {"delta": delta, "usage": {k: v for k, v in usage.items() if k != "iterations"}}
    if "iterations" in usage:
        final["usage"]["iterations"] = usage["iterations"]
    if "context_management" in message:
        # The applied edits come with the final message_delta (docs: context editing, streaming).
        final["context_management"] = message["context_management"]
    out.append((_event("message_delta", final), False))
    out.append((_event("message_stop", {}), False))
    return out


async def stream_response(
    request: web.Request, message: dict[str, Any], pacing: Pacing, broken: Break | None
) -> web.StreamResponse:
    """Write ``message`` as an event stream; fail it midway when ``broken`` says so."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    deltas = 0
    first = True
    for data, is_delta in events(message, pacing):
        if is_delta:
            if broken is not None and deltas >= broken.after_deltas:
                await _fail(request, response, broken)
                return response
            await asyncio.sleep(pacing.first_delay if first else pacing.delay)
            first = False
            deltas += 1
        await response.write(data)
    await response.write_eof()
    return response


async def _fail(request: web.Request, response: web.StreamResponse, broken: Break) -> None:
    if broken.how == "error":
        error = {"error": {"type": broken.error_type, "message": broken.message}}
        await response.write(_event("error", error))
        await response.write_eof()
        return
    transport = request.transport
    if transport is not None:
        transport.abort()  # the connection drops with the message half written
