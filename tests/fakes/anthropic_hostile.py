"""A hostile Messages API on 127.0.0.1: answers that try to hold a call hostage or break its reader.

It checks a request as the real API does (``POST /v1/messages``, a JSON body with ``model``,
``max_tokens`` and ``messages``, a credential) and then answers in the one ``shape`` it was
given, plain or streamed (``"stream": true``) alike:

- ``retry_after_3600`` / ``overloaded_3600``: 429 / 529 asking for an hour's wait;
- ``retry_after_date_2100``: 429 asking to wait until an HTTP date in 2100;
- ``retry_after_ms``: 529 asking for 3,600,000 ms;
- ``trickle``: a valid answer, one byte a second;
- ``endless``: a 200 that never ends (JSON whitespace, or SSE pings, every 10 ms);
- ``gzip_bomb``: a valid answer of ~512 MB, gzip-compressed to ~0.5 MB;
- ``deep_json``: ``[[[[...]]]]`` 100,000 deep (in a stream: as an event's data);
- ``wrong_types``: one of :data:`WRONG_TYPES` (a message) or :data:`WRONG_EVENTS` (a stream),
  chosen by ``variant``.

    async with HostileAnthropic("trickle") as fake:
        ...  # fake.base_url, fake.requests
"""

from __future__ import annotations

import asyncio
import functools
import json
import zlib
from typing import Any

from aiohttp import web

DEEP = 100_000
BOMB_BYTES = 512 * 1024 * 1024
_MB = b"A" * (1 << 20)

SHAPES = (
    "retry_after_3600",
    "overloaded_3600",
    "retry_after_date_2100",
    "retry_after_ms",
    "trickle",
    "endless",
    "gzip_bomb",
    "deep_json",
    "wrong_types",
)


def message(content: Any = None, usage: Any = None, **fields: Any) -> dict[str, Any]:
    """A Messages API answer; ``content`` and ``usage`` default to a short, valid one."""
    return {
        "id": "msg_hostile",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "hello"}] if content is None else content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2} if usage is None else usage,
        **fields,
    }


WRONG_TYPES: dict[str, dict[str, Any]] = {
    "usage_is_a_string": message(usage="lots"),
    "content_is_not_a_list": message(content="hello"),
    "content_is_a_dict": message(content={"type": "text", "text": "hello"}),
    "block_is_a_number": message(content=[7]),
    "text_is_a_number": message(content=[{"type": "text", "text": 42}]),
    "tool_input_is_a_string": message(content=[{"type": "tool_use", "id": "t", "name": "x", "input": "{}"}]),
    "count_is_a_word": message(usage={"input_tokens": "many", "output_tokens": 1}),
    "count_is_negative": message(usage={"input_tokens": -5, "output_tokens": 1}),
    "count_is_infinite": message(usage={"input_tokens": 1e400, "output_tokens": 1}),
    "count_is_a_fraction": message(usage={"input_tokens": 10, "output_tokens": 1.5}),
    "count_is_a_list": message(usage={"input_tokens": [1], "output_tokens": 1}),
    "stop_reason_is_a_number": message(stop_reason=7),
    "edits_are_mistyped": message(context_management={"applied_edits": [{"cleared_input_tokens": "x"}]}),
    "answer_is_a_list": [message()],  # type: ignore[dict-item]
}


def _event(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def _start(usage: Any = None) -> bytes:
    return _event("message_start", {"type": "message_start", "message": message(content=[], usage=usage)})


_BLOCK = _event(
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)


def _delta(text: Any, index: int = 0) -> bytes:
    return _event(
        "content_block_delta",
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}},
    )


def _end(usage: Any = None) -> bytes:
    return (
        _event("content_block_stop", {"type": "content_block_stop", "index": 0})
        + _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2} if usage is None else usage,
            },
        )
        + _event("message_stop", {"type": "message_stop"})
    )


def valid_stream() -> bytes:
    """A whole, well-formed stream saying "hello"."""
    return _start() + _BLOCK + _delta("hello") + _end()


WRONG_EVENTS: dict[str, bytes] = {
    "start_usage_is_a_string": _start(usage="lots") + _BLOCK + _delta("hi") + _end(),
    "delta_for_a_missing_block": _start() + _BLOCK + _delta("hi", index=5) + _end(),
    "delta_text_is_a_number": _start() + _BLOCK + _delta(42) + _end(),
    "final_usage_is_a_string": _start() + _BLOCK + _delta("hi") + _end(usage="lots"),
    "final_count_is_negative": _start() + _BLOCK + _delta("hi") + _end(usage={"output_tokens": -3}),
    "data_is_not_json": _start() + b"event: content_block_delta\ndata: {not json\n\n" + _end(),
    "no_message_start": _BLOCK + _delta("hi") + _end(),
}


@functools.cache
def gzip_bomb(streamed: bool) -> bytes:
    """~512 MB of a valid answer (one long text, or as many 64 KB text deltas), gzip-compressed."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    if streamed:
        delta = _delta("A" * 65536)
        parts = [_start() + _BLOCK, *([delta] * (BOMB_BYTES // len(delta))), _end()]
        out = [packer.compress(part) for part in parts]
    else:
        head, tail = json.dumps(message(content=[{"type": "text", "text": "@"}])).encode().split(b"@")
        out = [packer.compress(head)]
        out.extend(packer.compress(_MB) for _ in range(BOMB_BYTES >> 20))
        out.append(packer.compress(tail))
    out.append(packer.flush())
    return b"".join(out)


def deep_json() -> bytes:
    return b"[" * DEEP + b"]" * DEEP


class HostileAnthropic:
    """The hostile server; use as an async context manager."""

    def __init__(self, shape: str, *, variant: str | None = None, tick: float = 1.0) -> None:
        if shape not in SHAPES:
            raise ValueError(f"unknown shape {shape!r}")
        self.shape = shape
        self.variant = variant
        self.tick = tick
        """Seconds between two bytes of a trickle."""
        self.requests = 0
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    async def __aenter__(self) -> HostileAnthropic:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("HostileAnthropic is not started")
        return f"http://127.0.0.1:{self._port}"

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        if not (request.headers.get("x-api-key") or request.headers.get("Authorization")):
            return _error(401, "authentication_error", "x-api-key header is required")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request_error", "The request body is not valid JSON")
        if not isinstance(body, dict) or not all(k in body for k in ("model", "max_tokens", "messages")):
            return _error(400, "invalid_request_error", "model, max_tokens and messages are required")
        self.requests += 1
        streamed = body.get("stream") is True
        answer: web.StreamResponse = await getattr(self, "_" + self.shape)(request, streamed)
        return answer

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        """``count_tokens`` in the same shape (a trickle or wrong types of ``{"input_tokens": N}``)."""
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request_error", "The request body is not valid JSON")
        if not isinstance(body, dict) or not all(k in body for k in ("model", "messages")):
            return _error(400, "invalid_request_error", "model and messages are required")
        self.requests += 1
        if self.shape == "wrong_types":
            return web.json_response({"input_tokens": "many"})
        if self.shape == "trickle":
            response = _open(False)
            answer = b'{"input_tokens": 10}'
            response.content_length = len(answer)
            await response.prepare(request)
            for index in range(len(answer)):
                await response.write(answer[index : index + 1])
                await asyncio.sleep(self.tick)
            return response
        answer: web.StreamResponse = await getattr(self, "_" + self.shape)(request, False)
        return answer

    async def _retry_after_3600(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        return _error(429, "rate_limit_error", "Number of requests exceeded", {"retry-after": "3600"})

    async def _overloaded_3600(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        return _error(529, "overloaded_error", "Overloaded", {"retry-after": "3600"})

    async def _retry_after_date_2100(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        headers = {"retry-after": "Fri, 01 Jan 2100 00:00:00 GMT"}
        return _error(429, "rate_limit_error", "Number of requests exceeded", headers)

    async def _retry_after_ms(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        return _error(529, "overloaded_error", "Overloaded", {"retry-after-ms": "3600000"})

    async def _trickle(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        body = valid_stream() if streamed else json.dumps(message()).encode()
        response = _open(streamed)
        response.content_length = len(body)
        await response.prepare(request)
        for index in range(len(body)):
            await response.write(body[index : index + 1])
            await asyncio.sleep(self.tick)
        await response.write_eof()
        return response

    async def _endless(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        response = _open(streamed)
        await response.prepare(request)
        await response.write(_start() if streamed else b"")
        filler = _event("ping", {"type": "ping"}) if streamed else b" " * 64
        while True:
            await response.write(filler)
            await asyncio.sleep(0.01)

    async def _gzip_bomb(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        body = gzip_bomb(streamed)
        response = _open(streamed)
        response.headers["Content-Encoding"] = "gzip"
        response.content_length = len(body)
        await response.prepare(request)
        await response.write(body)
        await response.write_eof()
        return response

    async def _deep_json(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        if streamed:
            body = _start() + b"event: content_block_start\ndata: " + deep_json() + b"\n\n" + _end()
            return web.Response(body=body, headers={"Content-Type": "text/event-stream"})
        return web.Response(body=deep_json(), content_type="application/json")

    async def _wrong_types(self, request: web.Request, streamed: bool) -> web.StreamResponse:
        if streamed:
            body = WRONG_EVENTS[self.variant or "start_usage_is_a_string"]
            return web.Response(body=body, headers={"Content-Type": "text/event-stream"})
        return web.json_response(WRONG_TYPES[self.variant or "usage_is_a_string"])


def _open(streamed: bool) -> web.StreamResponse:
    kind = "text/event-stream" if streamed else "application/json"
    return web.StreamResponse(status=200, headers={"Content-Type": kind})


def _error(status: int, kind: str, text: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"type": "error", "error": {"type": kind, "message": text}}
    return web.json_response(body, status=status, headers=headers)
