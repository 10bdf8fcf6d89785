"""A gate in front of a fake's send endpoints, for killing a client at a well-defined moment.

Delivery is at-least-once at the platform boundary: a process killed after the platform took
a message but before it recorded that in SQL sends it again after restart (docs/operations.md: Scale-out).
A test that kills processes and counts duplicates ``hold()``s the gate first: sends then wait
*before* the fake handles them, so after a short pause no client is inside that window; the
test kills, and on ``release()`` a request whose client hung up meanwhile is dropped unhandled,
as a request lost in the network would be.
"""

from __future__ import annotations

import asyncio

from aiohttp import web


class SendGate:
    """Open by default; ``held`` counts requests that waited, ``dropped`` those whose client left."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self.held = 0
        self.dropped = 0

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    async def passage(self, request: web.Request) -> bool:
        """Wait while held; False when the client hung up meanwhile (then do not handle it)."""
        if self._open.is_set():
            return True
        self.held += 1
        await self._open.wait()
        transport = request.transport
        if transport is None or transport.is_closing():
            self.dropped += 1
            return False
        return True
