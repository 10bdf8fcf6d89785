"""One HTTP listener (``api.host``/``api.port``) shared by the ways in that speak HTTP.

The OpenAI-compatible API and the inbound webhooks are separate platforms, but an operator opens
one port for both: each mounts its ASGI app under its own path prefix, and the listener runs
while at least one of them is started.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount
from starlette.types import ASGIApp

from agent.errors import HygieiaError
from gateway.admin.server import AdminServer

_log = logging.getLogger(__name__)


async def _not_found(request: Request, exc: Exception) -> Response:
    # OpenAI's error shape, so a client pointed at a wrong path reads a clear answer.
    message = f"Unknown request URL: {request.method} {request.url.path}."
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return JSONResponse(body, status_code=404)


class DoorListener:
    """Serves the mounted apps on ``host:port`` from the first :meth:`open` to the last :meth:`close`."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self._requested_port = port
        self._mounts: dict[str, ASGIApp] = {}
        self._users = 0
        self._server: AdminServer | None = None
        self._lock = asyncio.Lock()

    def mount(self, prefix: str, app: ASGIApp) -> None:
        """Serve ``app`` under ``prefix`` (``/v1``, ``/hooks``); before the first :meth:`open`."""
        if not prefix.startswith("/") or prefix.endswith("/"):
            raise HygieiaError(f"mount prefix {prefix!r}: start with '/', no trailing '/'")
        if prefix in self._mounts:
            raise HygieiaError(f"{prefix} is already mounted")
        if self._server is not None:
            raise HygieiaError("mount before the listener opens")
        self._mounts[prefix] = app

    @property
    def port(self) -> int:
        """The port listened on (the one chosen when ``api.port`` is 0)."""
        if self._server is None:
            raise HygieiaError("the listener is not open")
        return self._server.port

    async def open(self) -> None:
        """Start listening (the first caller) or join (the others)."""
        async with self._lock:
            self._users += 1
            if self._server is not None:
                return
            routes = [Mount(prefix, app=app) for prefix, app in self._mounts.items()]
            app = Starlette(routes=routes, exception_handlers={404: _not_found})
            server = AdminServer(
                app,
                host=self.host,
                port=self._requested_port,
                label="HTTP ways in (" + ", ".join(self._mounts) + ")",
                port_setting="api.port (HYGIEIA_API__PORT)",
            )
            try:
                await server.start()
            except BaseException:
                self._users -= 1
                raise
            self._server = server

    async def close(self) -> None:
        """Leave; the last one out stops the server (running requests finish first)."""
        async with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users or self._server is None:
                return
            server, self._server = self._server, None
            await server.stop()
