"""Discord's rate limits paced across the cluster, over a :class:`gateway.platforms.pacing.RatePacer`.

discord.py keeps Discord's buckets (a global 50 requests/s, and per route: 5 messages per 5 s in
a channel) and waits out 429s, but in one process only. With the limits shared, every message
posted or edited first reserves a slot in ``discord:global`` and ``discord:channel:<id>``, shared
by every worker; a 429 any worker meets (seen on the wire, through aiohttp's trace hooks, before
discord.py waits it out) pauses ``discord:global`` when Discord says it is global, else that
channel, for every worker. discord.py's own buckets stay in force underneath.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from types import SimpleNamespace

import aiohttp

from agent.errors import StoreError
from gateway.platforms.pacing import RatePacer, ScopeSpec

_log = logging.getLogger(__name__)

PLATFORM = "discord"
_CHANNEL = re.compile(r"/channels/(\d+)/")


@dataclass(frozen=True, slots=True)
class DiscordRates:
    """How fast sends may go: below Discord's 50 requests/s, and its 5 messages per 5 s in a channel."""

    per_second: float = 40.0
    channel_interval_seconds: float = 1.0
    identify_interval_seconds: float = 5.0
    """Discord lets a bot IDENTIFY once per 5 s (``max_concurrency`` 1, every bot under 150k guilds)."""


def retry_after(headers: object) -> float | None:
    """Seconds a 429 asks to wait: ``X-RateLimit-Reset-After`` (float), else ``Retry-After``."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    for name in ("X-RateLimit-Reset-After", "Retry-After"):
        value = get(name)
        if value is not None:
            try:
                return float(value)
            except ValueError:
                continue
    return None


class DiscordPacing:
    """Reserve before a post or an edit; share the 429s discord.py meets (:meth:`trace_config`)."""

    def __init__(self, pacer: RatePacer, rates: DiscordRates) -> None:
        self._pacer = pacer
        self._rates = rates

    async def before_send(self, channel_id: int) -> float:
        """Wait for the next shared slot of the bot and of the channel; returns the seconds waited."""
        scopes = [
            (f"{PLATFORM}:global", 1.0 / self._rates.per_second),
            (f"{PLATFORM}:channel:{channel_id}", self._rates.channel_interval_seconds),
        ]
        # Unavailable: discord.py's own buckets still pace this process.
        return await self._wait_for(scopes, "sending on local limits")

    async def before_identify(self, shard_id: int) -> float:
        """Wait for the bot's next shared IDENTIFY slot (a shard of any node, one at a time);
        returns the seconds waited. Concurrent identifies from two nodes would be refused."""
        # Unavailable: Discord answers INVALID_SESSION and discord.py retries.
        return await self._wait_for(
            [(f"{PLATFORM}:identify", self._rates.identify_interval_seconds)], f"identifying shard {shard_id}"
        )

    async def _wait_for(self, scopes: list[ScopeSpec], fallback: str) -> float:
        try:
            wait = await self._pacer.rate_reserve(PLATFORM, scopes)
        except StoreError as exc:
            _log.warning("discord: shared rate limits unavailable, %s: %s", fallback, exc)
            return 0.0
        if wait > 0:
            await asyncio.sleep(wait)
        return wait

    def trace_config(self) -> aiohttp.TraceConfig:
        trace = aiohttp.TraceConfig()
        trace.on_request_end.append(self._on_request_end)
        return trace

    async def _on_request_end(
        self,
        _session: aiohttp.ClientSession,
        _context: SimpleNamespace,
        params: aiohttp.TraceRequestEndParams,
    ) -> None:
        response = params.response
        if response.status != 429:
            return
        seconds = retry_after(response.headers)
        if seconds is None or seconds <= 0:
            return
        is_global = response.headers.get("X-RateLimit-Global", "").lower() == "true"
        channel = _CHANNEL.search(params.url.path)
        if is_global:
            names = [f"{PLATFORM}:global"]
        elif channel is not None:
            names = [f"{PLATFORM}:channel:{channel.group(1)}"]
        else:
            return  # a route we do not pace: discord.py waits it out here
        try:
            await self._pacer.rate_pause(PLATFORM, names, seconds)
        except StoreError as exc:
            _log.warning("discord: could not share a 429 pause: %s", exc)
        else:
            _log.info("discord: 429 on %s, pausing %s for %.2fs", params.url.path, names, seconds)
