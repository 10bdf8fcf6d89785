"""discord.py wiring: where it connects, the clients that forward events, and a guard on its parsers.

discord.py reads its endpoints from two process-wide class attributes, ``Route.BASE`` (REST)
and ``DiscordWebSocket.DEFAULT_GATEWAY`` (the websocket). :func:`point_at` is the one place
that changes them; it returns the function that puts the previous values back.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Protocol

import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

_log = logging.getLogger(__name__)


class ClientEvents(Protocol):
    """What the adapter wants to hear from the client."""

    def client_ready(self) -> None: ...

    def client_message(self, message: discord.Message, *, edited: bool) -> None: ...

    def client_interaction(self, interaction: discord.Interaction) -> None: ...


def intents() -> discord.Intents:
    """Guild metadata and channels, guild and DM messages, and their content (privileged)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


_pointed: list[object] = []  # one token per adapter that called point_at and has not restored yet
_original: tuple[str, yarl.URL] = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)


def point_at(api_base: str | None, gateway_url: str | None) -> Callable[[], None]:
    """Set discord.py's REST base and default gateway (when given); returns the restorer.

    Several adapters in one process (tests; a node running shards) share the class attributes:
    the values found before the first one are put back when the last one restores, so that
    stopping one adapter never points the others' reconnects elsewhere.
    """
    global _original
    if not _pointed:
        _original = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    token = object()
    _pointed.append(token)
    if api_base:
        Route.BASE = api_base.rstrip("/")
    if gateway_url:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)

    def restore() -> None:
        if token in _pointed:
            _pointed.remove(token)
        if not _pointed:
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = _original

    return restore


def set_gateway(url: str) -> None:
    """The gateway an API named (``GET /gateway/bot``), used when only the API base was configured."""
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)


class _Forwarding:
    """The event methods discord.py looks up by name (``on_<event>``), forwarded to the adapter."""

    events: ClientEvents

    async def on_ready(self) -> None:
        self.events.client_ready()

    async def on_message(self, message: discord.Message) -> None:
        # Synchronous hand-off: events run as tasks in arrival order, so the queue keeps that order.
        self.events.client_message(message, edited=False)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        self.events.client_interaction(interaction)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        # The raw event fires for uncached messages too; embed unfurls arrive without edited_at.
        if payload.message.edited_at is not None:
            self.events.client_message(payload.message, edited=True)


class Client(_Forwarding, discord.Client):
    def __init__(self, events: ClientEvents, **options: Any) -> None:
        super().__init__(**options)
        self.events = events
        guard_parsers(self)


class ShardedClient(_Forwarding, discord.AutoShardedClient):
    """The shards ``discord.shard_ids`` names (of ``shard_count``) in one process."""

    def __init__(self, events: ClientEvents, **options: Any) -> None:
        super().__init__(**options)
        self.events = events
        guard_parsers(self)


def guard_parsers(client: discord.Client) -> None:
    """Make every gateway event parser log a malformed payload instead of raising.

    discord.py calls its parsers straight from the websocket loop: a KeyError on one bad
    MESSAGE_CREATE would end ``connect()`` and with it the bot. The parsers live in a
    dict on the client's connection state; wrapping them in place is the only hook.
    """
    parsers: dict[str, Callable[[Any], None]] = client._connection.parsers
    for event, parse in list(parsers.items()):
        parsers[event] = _guarded(event, parse)


def _guarded(event: str, parse: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(parse)
    def guarded(data: Any) -> None:
        try:
            parse(data)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            _log.warning("discord: skipping malformed %s event (%r): %.300r", event, exc, data)

    return guarded
