"""One MCP server connection: a lifecycle object, opened at start, kept alive, reconnected with backoff.

The connection runs in a task of its own (the SDK's client must be entered and left in one task);
a tool call borrows the open client and never opens a connection. A server that cannot be reached
is a state of this object ("down since ... because ..."), and every call meanwhile costs only
that call a tool error the model reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from agent.clock import Clock, utcnow
from agent.tools.base import ToolOutput
from agent.tools.mcp_servers.results import as_output, failed, unavailable
from agent.tools.mcp_servers.spec import ServerSpec

_log = logging.getLogger(__name__)

Status = Literal["starting", "up", "down", "stopped"]
CHILD_ENV_KEYS = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ")
"""What a stdio child inherits from the service (beside the ``env`` it declares): never a secret."""
MAX_LIST_PAGES = 100


@dataclass(frozen=True, slots=True)
class ServerState:
    """Where a connection stands, for ``/status``, the doctor and the error a call returns."""

    status: Status
    since: datetime
    reason: str = ""
    tools: int = 0

    def describe(self) -> str:
        at = f"{self.since:%Y-%m-%d %H:%M:%S} UTC"
        if self.status == "up":
            return f"up since {at}, {self.tools} tools"
        if self.status == "down":
            return f"down since {at} because {self.reason}"
        return f"{self.status} since {at}"


def child_environment(declared: dict[str, str] | Any, parent: dict[str, str] | None = None) -> dict[str, str]:
    """A stdio child's whole environment: PATH, HOME and the locale of ``parent``, then ``declared``."""
    source = os.environ if parent is None else parent
    env = {k: source[k] for k in CHILD_ENV_KEYS if k in source}
    env.update({k: v for k, v in source.items() if k.startswith("LC_")})
    env.update(declared)
    return env


def describe_failure(exc: BaseException) -> str:
    """One line for a failure the SDK or the transport raised (a group names its first cause)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, MCPError):
        return exc.message or f"error {exc.code}"
    if isinstance(exc, ValidationError):
        return "it answered something that is not MCP"
    if isinstance(exc, asyncio.CancelledError):
        return "the connection was torn down"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class ServerConnection:
    """The connection to one server; ``start``/``stop`` (or ``async with``) bound its life."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        on_change: Callable[[ServerConnection], None] | None = None,
        clock: Clock = utcnow,
        keepalive_seconds: float = 30.0,
        backoff: tuple[float, float] = (1.0, 60.0),
        target: Any = None,
    ) -> None:
        """``target``: an in-process server object to talk to instead of ``spec``'s transport (tests)."""
        self.spec = spec
        self._on_change = on_change
        self._clock = clock
        self._keepalive = keepalive_seconds
        self._backoff = backoff
        self._target = target
        self._client: Client | None = None
        self._listed: tuple[types.Tool, ...] = ()
        self._state = ServerState("stopped", clock())
        self._runner: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._settled = asyncio.Event()
        self._lost: str | None = None
        self._stopping = False
        self._was_up = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def listed(self) -> tuple[types.Tool, ...]:
        """The server's tools as last listed (kept while it is down: calls then say why they fail)."""
        return self._listed

    async def __aenter__(self) -> ServerConnection:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open the connection; returns once it is up or has failed its first try (never raises)."""
        if self._runner is not None:
            raise RuntimeError(f"the connection to server {self.name} is already started")
        self._stopping = False
        if self.spec.unusable:
            self._down(self.spec.unusable)
            return
        self._set("starting")
        self._runner = asyncio.create_task(self._run(), name=f"mcp-server-{self.name}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.spec.connect_timeout_seconds + 1.0):
                await self._settled.wait()

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            self._set("stopped")
            return
        self._stopping = True
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        self._client = None
        self._set("stopped")

    def refresh(self) -> None:
        """List the tools again soon (the server said its list changed)."""
        self._wake.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call ``tool``; every failure is a tool error naming the server, never an exception
        (a cancellation of the caller still propagates)."""
        client = self._client
        if client is None or self._state.status != "up":
            return unavailable(self.name, self._state.describe())
        timeout = self.spec.timeout_seconds
        # In a task of its own: a transport torn down mid-call cancels that task, not the turn.
        task = asyncio.create_task(client.call_tool(tool, arguments, read_timeout_seconds=timeout))
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout + 1.0)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            task.cancel()
            return unavailable(self.name, f"no answer within {timeout:g} s")
        if task.cancelled():
            self._mark_lost("the connection closed mid-call")
            return unavailable(self.name, "the connection closed mid-call")
        exc = task.exception()
        if exc is None:
            return as_output(task.result())
        return self._failed_call(tool, exc)

    def _failed_call(self, tool: str, exc: BaseException) -> ToolOutput:
        timeout = self.spec.timeout_seconds
        if isinstance(exc, MCPError) and exc.code == types.REQUEST_TIMEOUT:
            return unavailable(self.name, f"no answer within {timeout:g} s")
        if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
            self._mark_lost("the connection closed mid-call")
            return unavailable(self.name, "the connection closed mid-call")
        if isinstance(exc, MCPError):
            return failed(self.name, tool, exc.message)
        if isinstance(exc, ValidationError):
            return failed(self.name, tool, "its answer is not a valid MCP tool result")
        reason = describe_failure(exc)
        self._mark_lost(reason)
        return unavailable(self.name, reason)

    # -- the connection's own task ----------------------------------------------------------------

    async def _run(self) -> None:
        delay = self._backoff[0]
        while not self._stopping:
            try:
                await self._connected_life()
            except asyncio.CancelledError:
                if self._stopping:
                    raise
                self._down("the connection was torn down")
            except Exception as exc:  # any failure of a server is its state, never the service's
                self._down(describe_failure(exc))
            else:
                self._down(self._lost or "the connection ended")
            self._client, self._lost = None, None
            self._settled.set()
            if self._was_up:  # a connection that worked starts its backoff over
                delay, self._was_up = self._backoff[0], False
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff[1])

    async def _connected_life(self) -> None:
        async with AsyncExitStack() as stack:
            async with asyncio.timeout(self.spec.connect_timeout_seconds):
                client = await stack.enter_async_context(self._client_for(stack))
                await self._list(client)
            self._client, self._was_up = client, True
            self._set("up")
            self._settled.set()
            _log.info("MCP server %s is up: %d tools", self.name, len(self._listed))
            listener = asyncio.create_task(self._listen(client))
            stack.push_async_callback(_cancelled, listener)
            while self._lost is None and not self._stopping:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._keepalive):
                        await self._wake.wait()
                self._wake.clear()
                if self._lost is not None:
                    return
                # A keepalive and a change notice alike: list again, within the connect timeout.
                async with asyncio.timeout(self.spec.connect_timeout_seconds):
                    await self._list(client)

    def _client_for(self, stack: AsyncExitStack) -> Client:
        spec = self.spec
        if self._target is not None:
            server: Any = self._target
        elif spec.command:
            server = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=child_environment(spec.env), cwd=spec.cwd
            )
        else:
            assert spec.url is not None
            http = httpx2.AsyncClient(
                headers=dict(spec.headers),
                timeout=httpx2.Timeout(spec.connect_timeout_seconds, read=spec.timeout_seconds + 5.0),
            )
            stack.push_async_callback(http.aclose)
            server = streamable_http_client(spec.url, http_client=http)
        return Client(server, message_handler=self._message, cache=None)

    async def _message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.refresh()

    async def _listen(self, client: Client) -> None:
        """Change notices on a 2026-era connection come over a ``subscriptions/listen`` stream."""
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self.refresh()
        except Exception as exc:  # an older server, or a stream that dropped: keepalives still relist
            _log.debug("MCP server %s: no change stream (%s)", self.name, describe_failure(exc))

    async def _list(self, client: Client) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        listed = tuple(tools)
        changed = listed != self._listed
        self._listed = listed
        if self._state.status == "up":
            self._state = ServerState("up", self._state.since, tools=len(listed))
        if changed and self._on_change is not None:
            self._on_change(self)

    def _mark_lost(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
        self._wake.set()

    def _down(self, reason: str) -> None:
        if self._state.status != "down":
            _log.warning("MCP server %s is down: %s", self.name, reason)
        self._set("down", reason)

    def _set(self, status: Status, reason: str = "") -> None:
        since = self._state.since if self._state.status == status else self._clock()
        self._state = ServerState(status, since, reason, len(self._listed))


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
