"""Gateway connections of the Discord adapter: waiting for READY, closing, and one connection per shard.

With ``discord.shard_ids: auto`` the set of shards a process serves changes while it runs (nodes
join and leave the cluster), so each shard is its own discord.py ``Client(shard_id=i,
shard_count=n)``: taking or giving up one shard never disconnects the others, which a rebuilt
``AutoShardedClient`` would. :class:`ShardConnections` holds them; who decides the set is
someone else (:mod:`gateway.cluster.shard_claims`, through the database).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

import aiohttp
import discord
from discord.gateway import DiscordWebSocket

from gateway.errors import AdapterError
from gateway.platforms.discord_bot.client import ClientEvents

_log = logging.getLogger(__name__)

ClientFactory = Callable[[ClientEvents, int, int], discord.Client]
"""Builds the client of one shard: (events, shard_id, shard_count) -> an unconnected client."""


async def wait_ready(ready: asyncio.Event, connect: asyncio.Task[None], timeout: float) -> None:  # noqa: ASYNC109
    """Return once ``ready`` is set; :class:`AdapterError` saying why when the connection ended first
    or nothing came within ``timeout``."""
    waiter = asyncio.create_task(ready.wait())
    try:
        await asyncio.wait({waiter, connect}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if ready.is_set():
        return
    gateway = DiscordWebSocket.DEFAULT_GATEWAY
    if not connect.done():
        raise AdapterError(f"Discord: no READY from the gateway at {gateway} within {timeout:g} s")
    exc = connect.exception()
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        raise AdapterError(
            "Discord refused the message content intent: enable it for the bot in the Developer "
            "Portal (Bot -> Privileged Gateway Intents -> Message Content)"
        ) from exc
    if isinstance(exc, discord.ConnectionClosed):
        raise AdapterError(f"Discord gateway closed the connection (code {exc.code}): {exc.reason}") from exc
    # discord.py 2.7 trips over its own None websocket after a failed first connect: the
    # AttributeError's context is the real cause (refused connection, failed handshake).
    cause = exc.__context__ if isinstance(exc, AttributeError) and exc.__context__ else exc
    raise AdapterError(f"Discord: could not connect to the gateway at {gateway}: {cause}") from exc


async def close_client(client: discord.Client, connect: asyncio.Task[None] | None) -> None:
    """Close ``client`` (websocket and HTTP session) and wait for its connect task to end."""
    # discord.py 2.7 leaves the task that delays READY (guild_ready_timeout) running through
    # close(); it then dispatches on a closed client and fails in a way no caller can catch.
    ready_task: asyncio.Task[None] | None = client._connection._ready_task
    if ready_task is not None:
        ready_task.cancel()
    await client.close()
    if connect is None:
        return
    if not connect.done():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(connect), 5.0)
        connect.cancel()
    results = await asyncio.gather(connect, return_exceptions=True)
    if isinstance(results[0], discord.ConnectionClosed):
        _log.debug("discord: connection closed: %s", results[0])


class _ShardEvents:
    """A shard's READY is its own; its messages and interactions go to the adapter."""

    def __init__(self, adapter: ClientEvents) -> None:
        self.adapter = adapter
        self.ready = asyncio.Event()

    def client_ready(self) -> None:
        self.ready.set()

    def client_message(self, message: discord.Message, *, edited: bool) -> None:
        self.adapter.client_message(message, edited=edited)

    def client_interaction(self, interaction: discord.Interaction) -> None:
        self.adapter.client_interaction(interaction)


@dataclass(slots=True)
class _Shard:
    client: discord.Client
    connect: asyncio.Task[None]
    count: int


class ShardConnections:
    """The gateway connections of one process, one per shard, changed with :meth:`run`."""

    def __init__(
        self,
        adapter: ClientEvents,
        factory: ClientFactory,
        token: str,
        *,
        ready_timeout: float,
        identify_interval: float,
        shared_identify: Callable[[int], Awaitable[float]] | None = None,
    ) -> None:
        self._adapter = adapter
        self._factory = factory
        self._token = token
        self._ready_timeout = ready_timeout
        # Discord lets a bot IDENTIFY once per 5 s (max_concurrency 1): new shards wait their turn,
        # in this process by its own clock, or, with ``shared_identify`` (a cluster on PostgreSQL),
        # in one slot every node reserves from.
        self._identify_interval = identify_interval
        self._shared_identify = shared_identify
        self._last_identify = -float("inf")
        self._shards: dict[int, _Shard] = {}
        self._lock = asyncio.Lock()

    @property
    def running(self) -> frozenset[int]:
        """Shards whose connection is up (a connection that ended is not running)."""
        return frozenset(i for i, shard in self._shards.items() if not shard.connect.done())

    async def run(self, shard_ids: Collection[int], shard_count: int) -> frozenset[int]:
        """Connect exactly ``shard_ids`` of ``shard_count``: close the others first, then open the
        missing ones (and reopen ended ones). Returns the shards connected; one that could not
        connect is left out (logged), so the caller can give it up."""
        wanted = set(shard_ids)
        async with self._lock:
            for shard_id, shard in list(self._shards.items()):
                if shard_id not in wanted or shard.count != shard_count or shard.connect.done():
                    await self._close(shard_id)
            for shard_id in sorted(wanted - set(self._shards)):
                try:
                    await self._open(shard_id, shard_count)
                except AdapterError as exc:
                    _log.warning("discord: shard %d/%d did not connect: %s", shard_id, shard_count, exc)
            return self.running

    async def close(self) -> None:
        async with self._lock:
            for shard_id in list(self._shards):
                await self._close(shard_id)

    async def _open(self, shard_id: int, shard_count: int) -> None:
        if self._shared_identify is not None:
            await self._shared_identify(shard_id)
        elif (wait := self._last_identify + self._identify_interval - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        events = _ShardEvents(self._adapter)
        client = self._factory(events, shard_id, shard_count)
        connect: asyncio.Task[None] | None = None
        try:
            await client.login(self._token)
            self._last_identify = time.monotonic()
            connect = asyncio.create_task(client.connect(reconnect=True), name=f"discord-shard-{shard_id}")
            await wait_ready(events.ready, connect, self._ready_timeout)
        except (AdapterError, discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            await close_client(client, connect)
            raise AdapterError(str(exc)) from exc
        except BaseException:
            # Cancelled (a stop) mid-connect: a connection left open here would belong to nobody
            # and keep receiving the shard's events after another node claimed it.
            await asyncio.shield(close_client(client, connect))
            raise
        assert connect is not None
        self._shards[shard_id] = _Shard(client, connect, shard_count)
        connect.add_done_callback(functools.partial(self._ended, shard_id))
        _log.info("discord: shard %d/%d connected", shard_id, shard_count)

    async def _close(self, shard_id: int) -> None:
        shard = self._shards.pop(shard_id)
        await close_client(shard.client, shard.connect)
        _log.info("discord: shard %d/%d disconnected", shard_id, shard.count)

    def _ended(self, shard_id: int, task: asyncio.Task[None]) -> None:
        current = self._shards.get(shard_id)
        if current is None or current.connect is not task:
            return  # closed by us: whatever discord.py raised while closing is expected
        if not task.cancelled() and task.exception() is not None:
            # The next claim round reconnects it (a shard whose connection ended is not running).
            _log.error("discord: shard %d's connection failed", shard_id, exc_info=task.exception())
