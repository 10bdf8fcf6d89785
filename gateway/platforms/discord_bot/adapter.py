"""Discord adapter on discord.py 2.7: one gateway connection (or several shards) in, REST replies out.

Lifecycle: ``start`` logs in over REST (``GET /users/@me``), runs ``client.connect()`` as a task
and returns once the gateway said READY. Sharding: with ``discord.shard_ids``/``shard_count``
set, an ``AutoShardedClient`` runs those shards in this process (give each process its own
``shard_ids`` and the same ``shard_count``); otherwise a plain ``Client`` (no ``/gateway/bot``).
With ``shard_ids: auto`` ``start`` connects no shard: the client only logs in (REST, for
sending), and :meth:`DiscordAdapter.run_shards` connects the shards this node holds, one client
each (:mod:`gateway.platforms.discord_bot.shards`), as :mod:`gateway.cluster.shard_claims` decides.

Delivery. The Discord gateway has no acknowledgement: an event is ours once received, and a
RESUME after a dropped connection replays what was missed (discord.py does this). Messages go
through one queue to one worker, so the gateway's intake sees them in arrival order; a failed
intake is retried with backoff before the message is given up (logged). Messages sent while
the bot was offline are not fetched afterwards.

Sending: discord.py keeps Discord's per-route rate-limit buckets and waits out 429s (and
retries 5xx) itself; what still fails becomes :class:`AdapterError`. Replies never ping
@everyone, roles or users, except the author of the message replied to.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Collection
from typing import Any

import aiohttp
import discord

from agent.errors import ConfigError
from gateway.config import DiscordSettings
from gateway.errors import AdapterError
from gateway.platforms.base import (
    Attachment,
    CommandSpec,
    InboundHandler,
    InboundMessage,
    OutboundTarget,
    PlatformAdapter,
)
from gateway.platforms.discord_bot import interactions as slash
from gateway.platforms.discord_bot.client import (
    Client,
    ClientEvents,
    ShardedClient,
    intents,
    point_at,
    set_gateway,
)
from gateway.platforms.discord_bot.inbound import PLATFORM, ReadLimits, to_inbound
from gateway.platforms.discord_bot.pacing import DiscordPacing, DiscordRates
from gateway.platforms.discord_bot.posting import MENTIONS, SEND_ERRORS, channel_for, post, reply_reference
from gateway.platforms.discord_bot.shards import ShardConnections, close_client, wait_ready
from gateway.platforms.pacing import RatePacer
from gateway.splitter import utf16_len

_log = logging.getLogger(__name__)


class DiscordAdapter(PlatformAdapter):
    """A Discord bot: guild channels, threads and DMs in; replies out as text (Discord renders Markdown)."""

    name = PLATFORM
    text_limit = 2000
    text_format = "markdown"
    streams = True
    sends_alone = True

    def __init__(
        self,
        token: str,
        *,
        api_base: str | None,
        gateway_url: str | None,
        settings: DiscordSettings,
        ready_timeout: float = 60.0,
        stop_grace: float = 5.0,
        intake_attempts: int = 5,
        max_text_file_bytes: int = 200_000,
        commands: list[CommandSpec] | None = None,
    ) -> None:
        if not token:
            raise ConfigError("DISCORD_BOT_TOKEN: empty")
        _check_shards(settings)
        self._token = token
        self._options: dict[str, Any] = {
            "api_base": api_base,
            "gateway_url": gateway_url,
            "settings": settings,
            "ready_timeout": ready_timeout,
            "stop_grace": stop_grace,
            "intake_attempts": intake_attempts,
            "max_text_file_bytes": max_text_file_bytes,
            "commands": commands,
        }
        self._api_base = api_base
        self._gateway_url = gateway_url
        self._settings = settings
        # discord.py waits 5 s between the IDENTIFYs of the shards it runs.
        static = settings.shard_ids if isinstance(settings.shard_ids, list) else None
        shards = len(static) if static else (settings.shard_count or 1)
        self._ready_timeout = ready_timeout + (0 if settings.auto_shards else 5.5 * (shards - 1))
        self._shard_ready_timeout = ready_timeout
        self._shards: ShardConnections | None = None
        self._guild_ready_timeout = settings.guild_ready_timeout
        self._stop_grace = stop_grace
        self._intake_attempts = max(1, intake_attempts)
        self._limits = ReadLimits(max_text_file_bytes)
        self._client: discord.Client | None = None
        self._connect: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[tuple[discord.Message | discord.Interaction, bool]] = asyncio.Queue()
        self._commands = list(commands or [])
        self._interactions = slash.Interactions(self._commands, settings.interaction_defer_seconds)
        # Private answers this process could not give through their interaction (told once each).
        self._lost_private: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = asyncio.Event()
        self._restore: Callable[[], None] | None = None
        self._bot_id = 0
        self._pacing: DiscordPacing | None = None

    def share_rate_limits(self, pacer: RatePacer) -> None:
        """Pace posts and edits through ``pacer`` (every worker's, together) and share the 429s
        discord.py meets; twins made afterwards share it too."""
        if self._client is not None:
            raise AdapterError("Discord: rate limits are chosen before start")
        rates = DiscordRates(
            per_second=self._settings.rate_per_second,
            channel_interval_seconds=self._settings.rate_channel_interval_seconds,
            identify_interval_seconds=self._settings.identify_interval_seconds,
        )
        self._pacing = DiscordPacing(pacer, rates)

    def measure(self, text: str) -> int:
        """UTF-16 units: never less than the code points Discord counts, so a part that fits, fits."""
        return utf16_len(text)

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, handler: InboundHandler) -> None:
        if self._client is not None:
            raise AdapterError("Discord adapter is already started")
        self._ready.clear()
        self._queue = asyncio.Queue()
        self._restore = point_at(self._api_base, self._gateway_url)
        client = self._build_client()
        connect: asyncio.Task[None] | None = None
        try:
            await self._login(client)
            if self._api_base and not self._gateway_url:
                await self._discover_gateway(client)
            if not self._settings.auto_shards:
                connect = asyncio.create_task(client.connect(reconnect=True), name="discord-connect")
                await wait_ready(self._ready, connect, self._ready_timeout)
        except BaseException:
            await close_client(client, connect)
            self._restore_endpoints()
            raise
        assert client.user is not None  # set by login
        self._client, self._connect, self._bot_id = client, connect, client.user.id
        if connect is not None:
            connect.add_done_callback(self._connection_ended)
        else:
            self._shards = ShardConnections(
                self,
                self._shard_client,
                self._token,
                ready_timeout=self._shard_ready_timeout,
                identify_interval=self._settings.identify_interval_seconds,
                shared_identify=self._pacing.before_identify if self._pacing is not None else None,
            )
        self._worker = asyncio.create_task(self._intake(handler), name="discord-intake")
        await self._register_commands(client)
        _log.info("discord: started as %s (%s), %d guild(s)", client.user, client.user.id, len(client.guilds))

    @property
    def shared_intake(self) -> bool:
        """With ``shard_ids`` set (a list, or ``auto``) every intake node connects its own shards, so
        Discord is not elected; unsharded, one gateway connection per cluster is."""
        return self._settings.shard_ids is not None

    def twin(self) -> DiscordAdapter:
        other = DiscordAdapter(self._token, **self._options)
        other._pacing = self._pacing
        return other

    async def start_sending(self) -> None:
        """REST only (login, then posts and edits): no gateway connection, so any number of processes
        may hold one without receiving every event twice. Slash-command answers need the
        interaction's holder; here they go to the channel as ordinary messages."""
        if self._client is not None:
            raise AdapterError("Discord adapter is already started")
        self._restore = point_at(self._api_base, self._gateway_url)
        client = self._build_client()
        try:
            await self._login(client)
        except BaseException:
            await close_client(client, None)
            self._restore_endpoints()
            raise
        assert client.user is not None  # set by login
        self._client, self._bot_id = client, client.user.id
        _log.info("discord: sending as %s (no intake here)", client.user)

    async def stop(self) -> None:
        """Stop receiving, let queued messages reach the gateway (up to ``stop_grace``), disconnect."""
        client, self._client = self._client, None
        if client is None:
            return
        shards, self._shards = self._shards, None
        if shards is not None:
            await shards.close()
        await close_client(client, self._connect)
        self._connect = None
        worker, self._worker = self._worker, None
        if worker is not None:
            try:
                await asyncio.wait_for(self._queue.join(), self._stop_grace)
            except TimeoutError:
                _log.warning("discord: stopping with %d message(s) not handed over", self._queue.qsize() + 1)
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._interactions.close()
        self._restore_endpoints()
        _log.info("discord: stopped")

    # --- shards claimed at run time (shard_ids: auto) ---------------------------------------------

    @property
    def auto_shards(self) -> bool:
        return self._settings.auto_shards

    async def recommended_shard_count(self) -> int:
        """Discord's advice for this bot (``GET /gateway/bot``): the count when none is configured."""
        client = self._require_client()
        try:
            count, _, _ = await client.http.get_bot_gateway()
        except (discord.GatewayNotFound, aiohttp.ClientError, OSError) as exc:
            raise AdapterError(f"Discord: could not ask for the recommended shard count: {exc}") from exc
        return int(count)

    async def run_shards(self, shard_ids: Collection[int], shard_count: int) -> frozenset[int]:
        """Connect exactly these shards (``shard_ids: auto``); returns those that are connected."""
        self._require_client()
        if self._shards is None:
            raise AdapterError("Discord: run_shards needs discord.shard_ids: auto")
        return await self._shards.run(shard_ids, shard_count)

    def _shard_client(self, events: ClientEvents, shard_id: int, shard_count: int) -> discord.Client:
        return Client(
            events,
            intents=intents(),
            guild_ready_timeout=self._guild_ready_timeout,
            shard_id=shard_id,
            shard_count=shard_count,
        )

    def _build_client(self) -> discord.Client:
        options: dict[str, Any] = {"intents": intents(), "guild_ready_timeout": self._guild_ready_timeout}
        if self._pacing is not None:
            options["http_trace"] = self._pacing.trace_config()
        if self._settings.auto_shards:
            return Client(self, **options)  # REST only: sends, slash commands; shards come later
        if self._settings.shard_ids is not None or self._settings.shard_count is not None:
            return ShardedClient(
                self, shard_ids=self._settings.shard_ids, shard_count=self._settings.shard_count, **options
            )
        return Client(self, **options)

    async def _login(self, client: discord.Client) -> None:
        try:
            await client.login(self._token)
        except discord.LoginFailure as exc:
            raise AdapterError(
                "Discord refused the bot token (401 on /users/@me): check DISCORD_BOT_TOKEN"
            ) from exc
        except discord.HTTPException as exc:
            raise AdapterError(f"Discord login failed: HTTP {exc.status} {exc.text}") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise AdapterError(f"Discord is unreachable at {discord.http.Route.BASE}: {exc}") from exc

    async def _register_commands(self, client: discord.Client) -> None:
        """Slash commands on start; a failure is logged (text commands still work), never fatal."""
        if not self._settings.slash_commands or not self._commands:
            return
        try:
            written = await slash.register_commands(client, self._commands, self._settings.command_guild_ids)
        except (*SEND_ERRORS, AdapterError) as exc:
            _log.warning("discord: could not register the slash commands: %s", exc)
            return
        guilds = self._settings.command_guild_ids
        scope = f"guild(s) {guilds}" if guilds else "global"
        _log.info("discord: slash commands %s (%s)", "updated" if written else "unchanged", scope)

    async def _discover_gateway(self, client: discord.Client) -> None:
        try:
            _, url, _ = await client.http.get_bot_gateway()
        except (discord.GatewayNotFound, aiohttp.ClientError, OSError) as exc:
            raise AdapterError(
                f"Discord: could not ask {discord.http.Route.BASE} for its gateway: {exc}"
            ) from exc
        set_gateway(url)

    def _connection_ended(self, task: asyncio.Task[None]) -> None:
        if self._client is not None and not task.cancelled() and task.exception() is not None:
            _log.error(
                "discord: the gateway connection failed; no more messages arrive", exc_info=task.exception()
            )

    def _restore_endpoints(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None

    # --- intake ----------------------------------------------------------------------------------

    def client_ready(self) -> None:
        self._ready.set()

    def client_message(self, message: discord.Message, *, edited: bool) -> None:
        self._queue.put_nowait((message, edited))

    def client_interaction(self, interaction: discord.Interaction) -> None:
        # The 3-second clock runs from now: acknowledge (or arm the timer) before queueing.
        task = asyncio.create_task(self._take_interaction(interaction), name="discord-interaction")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _take_interaction(self, interaction: discord.Interaction) -> None:
        if await self._interactions.received(interaction):
            self._queue.put_nowait((interaction, False))

    async def _intake(self, handler: InboundHandler) -> None:
        """The one consumer: convert each message in order and hand it to the gateway."""
        while True:
            message, edited = await self._queue.get()
            try:
                if isinstance(message, discord.Interaction):
                    if not await self._deliver(handler, self._interactions.to_inbound(message)):
                        await self._interactions.failed(message)
                    continue
                inbound = await self._convert(message, edited)
                if inbound is not None:
                    await self._deliver(handler, inbound)
            except AdapterError as exc:
                _log.warning("discord: %s", exc)
            finally:
                self._queue.task_done()

    async def _convert(self, message: discord.Message, edited: bool) -> InboundMessage | None:
        # While stopping (client closed) the queue drains without downloading attachments.
        limits = (
            self._limits if self._client is not None else dataclasses.replace(self._limits, download=False)
        )
        try:
            return await to_inbound(
                message, bot_id=self._bot_id, ambient=self._settings.ambient, edited=edited, limits=limits
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            _log.warning("discord: could not read message %s: %r", getattr(message, "id", "?"), exc)
            return None

    async def _deliver(self, handler: InboundHandler, inbound: InboundMessage) -> bool:
        delay = 0.5
        for attempt in range(1, self._intake_attempts + 1):
            try:
                await handler(inbound)
                return True
            except Exception as exc:  # the gateway's intake failed: not committed, so try again
                if attempt == self._intake_attempts:
                    _log.error(
                        "discord: gave up handing message %s to the gateway after %d attempts",
                        inbound.platform_message_id,
                        attempt,
                        exc_info=exc,
                    )
                    return False
                _log.warning("discord: intake failed (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
        return False

    # --- sending ---------------------------------------------------------------------------------

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        """Send ``text`` to the chat (or its thread), replying to ``reply_to_message_id`` when set.

        ``text`` must fit (delivery splits); a longer text is refused (:meth:`refuse_oversized`).
        Returns the Discord message ids.
        """
        client = self._require_client()
        if not text.strip():
            return []
        self.refuse_oversized(text)
        ref = target.reply_to_message_id or ""
        if ref.startswith(slash.PREFIX):
            if self._interactions.holds(target):
                return await self._interactions.answer(slash.interaction_key(ref), text)
            # Restarted or expired: the answer goes to the channel as an ordinary message, but
            # a private one is the caller's only: the channel is told once to ask again.
            if slash.is_private(ref):
                if ref in self._lost_private:
                    return []
                self._lost_private.add(ref)
                text = slash.LOST_PRIVATE_ANSWER
            target = super().continuation(target)
        channel_id = int(target.thread_id or target.chat_id)
        channel = channel_for(client, channel_id)
        if self._pacing is not None:
            await self._pacing.before_send(channel_id)
        return [await post(channel, channel_id, text, reply_reference(target, channel_id))]

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        """An attachment's bytes from its CDN URL (the file id of a Discord attachment)."""
        client = self._require_client()
        if not attachment.file_id:
            raise AdapterError("Discord: the attachment has no URL")
        try:
            data: bytes = await client.http.get_from_cdn(attachment.file_id)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise AdapterError(f"Discord: could not fetch the attachment: {exc}") from exc
        if len(data) > max_bytes:
            raise AdapterError(f"Discord: the attachment is larger than {max_bytes:,} bytes")
        return data

    async def edit(self, target: OutboundTarget, message_id: str, text: str) -> None:
        """PATCH the message's content (a streamed reply growing, or its final text)."""
        client = self._require_client()
        channel_id = int(target.thread_id or target.chat_id)
        message = client.get_partial_messageable(channel_id).get_partial_message(int(message_id))
        if self._pacing is not None:
            await self._pacing.before_send(channel_id)
        try:
            await message.edit(content=text, allowed_mentions=MENTIONS)
        except discord.NotFound as exc:
            raise AdapterError(f"Discord: message {message_id} to edit is gone: {exc.text}") from exc
        except SEND_ERRORS as exc:
            raise AdapterError(f"Discord edit failed: {exc}") from exc

    def continuation(self, target: OutboundTarget) -> OutboundTarget:
        """Later parts of an interaction's answer stay with the interaction (followups)."""
        if (target.reply_to_message_id or "").startswith(slash.PREFIX):
            return target
        return super().continuation(target)

    async def send_typing(self, target: OutboundTarget) -> None:
        """Best effort: Discord shows "typing…" for ~10 s; a failure is logged, never raised."""
        client = self._require_client()
        try:
            await channel_for(client, int(target.thread_id or target.chat_id)).typing()
        except SEND_ERRORS as exc:
            _log.debug("discord: typing indicator failed: %s", exc)

    def _require_client(self) -> discord.Client:
        if self._client is None:
            raise AdapterError("Discord adapter is not started")
        return self._client


def _check_shards(settings: DiscordSettings) -> None:
    ids, count = settings.shard_ids, settings.shard_count
    if ids == "auto":
        return
    if ids is not None and count is None:
        raise ConfigError("HYGIEIA_DISCORD__SHARD_IDS needs HYGIEIA_DISCORD__SHARD_COUNT")
    if count is not None and (count < 1 or any(not 0 <= i < count for i in ids or ())):
        raise ConfigError(f"HYGIEIA_DISCORD__SHARD_IDS must be within 0..{(count or 1) - 1}")
