"""Serving the archive's MCP server: over stdio, or over Streamable HTTP behind the admin token."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import socket
from collections.abc import Callable, Generator

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from agent.errors import ConfigError

_log = logging.getLogger(__name__)

PATH = "/mcp"
"""Where the Streamable HTTP endpoint is served."""


class BearerToken:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>`` (compared in
    constant time); anything else is a 401 with a JSON reason, before the MCP app sees it."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self._app = app
        self._expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._signed_in(scope):
            await self._app(scope, receive, send)
            return
        body = json.dumps(
            {"error": "unauthorized: send Authorization: Bearer <HYGIEIA_ADMIN_TOKEN>"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="hygieia"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _signed_in(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        # A wrong scheme still costs one comparison, so timing says nothing about the header's shape.
        same = hmac.compare_digest(token.strip(), self._expected)
        return same and scheme.lower() == b"bearer"


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: Ctrl-C reaches the command, which exits cleanly."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket; a port taken or a bad address is one clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family)
        # Accepted sockets inherit it; asyncio sets it only on proto IPPROTO_TCP (gateway.admin.server).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    except OSError as exc:
        raise ConfigError(
            f"mcp serve: cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port"
        ) from None


async def serve_http(
    srv: MCPServer, *, token: str, host: str, port: int, on_ready: Callable[[str], None] | None = None
) -> None:
    """Serve ``srv`` over Streamable HTTP on ``host:port`` at :data:`PATH` until cancelled."""
    app = BearerToken(srv.streamable_http_app(streamable_http_path=PATH, host=host), token=token)
    config = uvicorn.Config(
        app,
        lifespan="on",  # the MCP app's session manager starts in its lifespan
        log_config=None,  # our logging (and its redaction filter) stays in charge
        access_log=False,
        server_header=False,
    )
    sock = _listen(host, port)
    bound = int(sock.getsockname()[1])
    server = _Server(config)
    if on_ready is not None:
        shown = f"[{host}]" if ":" in host else host
        on_ready(f"http://{shown}:{bound}{PATH}")
    _log.info("archive MCP server listening on http://%s:%d%s", host, bound, PATH)
    await server.serve(sockets=[sock])
