"""One long poller per bot token, as Telegram enforces it.

A ``getUpdates`` that arrives while another one is still waiting is answered 409 Conflict with
Telegram's own description (measured: NOTES.md). A poller that hung up (its request cancelled,
its process killed) stops holding the token at once, as at Telegram, so a restarted or newly
elected poller is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from typing import Any

from aiohttp import web

from tests.fakes.telegram_wire import ApiError

CONFLICT = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
_REQUEST: contextvars.ContextVar[web.Request | None] = contextvars.ContextVar("request", default=None)


class PollDesk:
    """Who is long polling now; ``conflicts`` counts the 409s."""

    def __init__(self) -> None:
        self.conflicts = 0
        self._waiting: set[Any] = set()

    def request(self, request: web.Request) -> None:
        """The request being handled (each aiohttp handler runs in its own task and context)."""
        _REQUEST.set(request)

    @contextlib.contextmanager
    def poll(self) -> Iterator[None]:
        if any(not transport.is_closing() for transport in self._waiting):
            self.conflicts += 1
            raise ApiError(409, CONFLICT)
        request = _REQUEST.get()
        transport = request.transport if request is not None else None
        if transport is not None:
            self._waiting.add(transport)
        try:
            yield
        finally:
            self._waiting.discard(transport)

    async def wait(self, ready: Callable[[], bool], wake: asyncio.Event, seconds: float) -> None:
        """Until an update comes (``ready()`` or ``wake``), ``seconds`` pass, or the poller hangs up."""
        request = _REQUEST.get()
        transport = request.transport if request is not None else None
        deadline = time.monotonic() + seconds
        if ready() or seconds <= 0:
            return
        wake.clear()
        while transport is not None and not transport.is_closing():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), min(0.05, left))
                return  # a new update (or the server stopping)
