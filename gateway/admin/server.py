"""Serving the admin app with uvicorn: an explicit start/stop lifecycle, and the ``admin serve`` process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable, Generator, Sequence
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp

from agent.errors import ConfigError, HygieiaError
from agent.tokens import model_info
from gateway.admin.app import create_app
from gateway.admin.middleware import check_admin_token
from gateway.config import Settings
from gateway.runner.models import budget_for, build_context_engine, build_provider, context_window_for
from gateway.store.db import Database
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

GRACE_SECONDS = 5.0
"""How long running requests may take to finish once a stop is asked."""


MAX_REQUEST_HEAD = 256 * 1024
"""Request line and headers: room for a long search query (10 KB of emoji is 30 KB percent-encoded)."""


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handling: the process owning the loop decides when to stop
    (uvicorn's own would re-raise SIGTERM after shutdown, so the process could not exit 0)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _listen(host: str, port: int, label: str, port_setting: str) -> socket.socket:
    """A listening socket; failing here (port taken, bad address) is one clear error, not uvicorn's exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out, not 0 as socket.create_server leaves it: asyncio turns Nagle off
    # (TCP_NODELAY) only on sockets that say TCP, and with Nagle on every keep-alive response
    # waited ~40 ms for the client's delayed ACK (headers and body are two writes).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if os.name == "posix":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen()
        return sock
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"{label}: cannot listen on {host}:{port} ({exc.strerror or exc}); choose another {port_setting}"
        ) from None


class AdminServer:
    """An ASGI app served on ``host:port`` (also an async context manager); the client address is
    the peer's, or X-Forwarded-For's when the peer is one of ``trusted_proxies`` (addresses, networks).

    ``await start()`` returns once it accepts connections; ``await stop()`` lets running
    requests finish (up to the grace) and closes.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        host: str,
        port: int,
        grace_seconds: float = GRACE_SECONDS,
        trusted_proxies: Sequence[str] = (),
        label: str = "admin API",
        port_setting: str = "--port or HYGIEIA_ADMIN__PORT",
    ) -> None:
        self._label, self._port_setting = label, port_setting
        self._config = uvicorn.Config(
            app,
            # uvicorn would take X-Forwarded-For from 127.0.0.1 by default: any local process could
            # then pick its address and walk around the throttle. Only a named proxy is believed.
            proxy_headers=bool(trusted_proxies),
            forwarded_allow_ips=list(trusted_proxies) or [],
            lifespan="off",
            log_config=None,  # our logging (and its redaction filter) stays in charge
            access_log=False,  # uvicorn would log query strings, and ?token= is one
            timeout_graceful_shutdown=max(int(grace_seconds), 1),
            server_header=False,
            h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
        )
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._bound_port: int | None = None

    @property
    def port(self) -> int:
        """The port actually listened on (useful with port 0)."""
        if self._bound_port is None:
            raise HygieiaError("AdminServer.start() has not been called")
        return self._bound_port

    @property
    def finished(self) -> asyncio.Task[None]:
        """The serving task: done when the server stopped (or failed)."""
        if self._task is None:
            raise HygieiaError("AdminServer.start() has not been called")
        return self._task

    async def start(self) -> None:
        if self._task is not None:
            raise HygieiaError("AdminServer already started")
        sock = _listen(self._host, self._port, self._label, self._port_setting)
        self._bound_port = int(sock.getsockname()[1])
        self._server = _Server(self._config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="admin-server")
        while not self._server.started:
            if self._task.done():
                await self._task  # raises what stopped it
                raise HygieiaError("the admin server stopped while starting")
            await asyncio.sleep(0.01)
        _log.info("%s listening on http://%s:%d", self._label, self._host, self._bound_port)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await self._task
        finally:
            self._server, self._task = None, None
            _log.info("%s stopped", self._label)

    async def __aenter__(self) -> AdminServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def page_url(host: str, port: int) -> str:
    """Where a browser on this machine finds the admin page (a wildcard address is not one to open)."""
    shown = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


async def serve_admin(
    settings: Settings, *, host: str, port: int, on_ready: Callable[[str], None] | None = None
) -> int:
    """``hygieia admin serve``: serve until SIGINT/SIGTERM, then stop gracefully; the exit code.
    ``on_ready`` gets the page's URL once the server listens."""
    token = check_admin_token(settings.admin_token.get_secret_value() if settings.admin_token else None)
    db = Database(settings.resolved_database_url)
    await db.connect()
    store = Store(db)
    if not await store.ping():
        _log.warning("the database has no schema yet: run `hygieia migrate` (until then the API answers 503)")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, _on_signal, stop, sig)
            installed.append(sig)
    # Compaction from the admin uses the service's own provider and compressor (same settings).
    provider = build_provider(settings)
    engine = build_context_engine(settings, provider, sink=store.record_engine_failure, store=store)
    app = create_app(
        store,
        token=token,
        engine=engine,
        context_window=lambda model: context_window_for(settings, model),
        budget=lambda model: budget_for(settings, model),
        known_model=lambda model: model_info(model, overrides=settings.models or None).known,
        config_overrides=settings.overrides,
    )
    try:
        proxies = settings.admin.trusted_proxies
        async with AdminServer(app, host=host, port=port, trusted_proxies=proxies) as server:
            if on_ready is not None:
                on_ready(page_url(host, server.port))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait([stopping, server.finished], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await provider.aclose()
        await db.dispose()
    return 0


def _on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    _log.info("%s received: stopping the admin API", sig.name)
    stop.set()
