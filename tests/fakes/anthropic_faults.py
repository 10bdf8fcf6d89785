"""Fault injection for the fake Messages API: a share of ``/v1/messages`` calls fail the way the real
service and the network do. Kept apart from :mod:`tests.fakes.anthropic` so the fake's strictness is
untouched: a call that is not chosen to fail is answered by the ordinary fake.

Faults, in turn: 429 with ``retry-after``, 529 overloaded, 500, a hang past the client's timeout, a
connection reset (RST, no response), and a disconnect mid-response: after half of a 200 response's
body, or, for a streamed answer, after its first delta (through the fake's own stream breaks).

    async with FaultyAnthropic(rate=0.3, seed=7) as fake:
        ...  # fake.injected counts the faults by kind
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import struct
from collections import Counter, deque
from contextvars import ContextVar
from typing import Any

from aiohttp import web

from tests.fakes.anthropic import FakeAnthropic, error_reply
from tests.fakes.anthropic_sse import Break

# Set in the handler task of a call chosen to drop mid-stream; each aiohttp handler runs in its own
# task, so concurrent calls never take each other's break.
_DROP_THIS_STREAM: ContextVar[bool] = ContextVar("drop_this_stream", default=False)


class _PerRequestBreaks(deque[Break]):
    """The fake's queue of stream breaks, plus a drop for the request whose task asks for one."""

    def __bool__(self) -> bool:
        return _DROP_THIS_STREAM.get() or len(self) > 0

    def popleft(self) -> Break:
        return Break(1, "drop") if _DROP_THIS_STREAM.get() else super().popleft()


FAULTS = ("429", "529", "500", "timeout", "reset", "disconnect")


class FaultyAnthropic(FakeAnthropic):
    """The fake server, failing about ``rate`` of the message calls (seeded, every kind in turn)."""

    def __init__(
        self, *, rate: float = 0.3, seed: int = 0, hang_seconds: float = 3.0, **options: Any
    ) -> None:
        super().__init__(**options)
        self.rate = rate
        self.hang_seconds = hang_seconds
        self.injected: Counter[str] = Counter()
        self.answered = 0
        self._rng = random.Random(seed)
        self._turn = 0
        self._breaks = _PerRequestBreaks(self._breaks)

    def _next_fault(self) -> str | None:
        if self._rng.random() >= self.rate:
            return None
        fault = FAULTS[self._turn % len(FAULTS)]
        self._turn += 1
        return fault

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        fault = self._next_fault()
        if fault is None:
            self.answered += 1
            return await super()._messages(request)
        self.injected[fault] += 1
        await request.read()
        if fault == "429":
            return self._error(
                error_reply(429, "rate_limit_error", "Number of requests exceeded", {"retry-after": "1"})
            )
        if fault == "529":
            return self._error(error_reply(529, "overloaded_error", "Overloaded"))
        if fault == "500":
            return self._error(error_reply(500, "api_error", "Internal server error"))
        if fault == "timeout":
            await asyncio.sleep(self.hang_seconds)  # the client has given up by now
            return await super()._messages(request)
        if fault == "reset":
            _reset(request)
            return await _until_cancelled()
        if _streamed(await request.read()):
            _DROP_THIS_STREAM.set(True)
            return await super()._messages(request)
        full = await super()._messages(request)
        body = bytes(full.body) if isinstance(full.body, bytes | bytearray) else b""
        partial = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        partial.content_length = len(body)
        await partial.prepare(request)
        await partial.write(body[: len(body) // 2])
        _reset(request)
        return await _until_cancelled()


def _streamed(raw: bytes) -> bool:
    try:
        return json.loads(raw).get("stream") is True
    except (ValueError, AttributeError):
        return False


def _reset(request: web.Request) -> None:
    """Drop the connection with a RST, as a crashed proxy would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.close()


async def _until_cancelled() -> web.StreamResponse:
    # aiohttp cancels the handler once the connection is gone (handler_cancellation=True).
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")
