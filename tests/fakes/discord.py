"""A fake Discord (REST API v10 + gateway websocket) on 127.0.0.1 that discord.py talks to unchanged.

REST under ``/api/v10`` with ``Authorization: Bot <token>``; JSON answers carry
``Content-Type: application/json`` exactly (discord.py reads anything else as text). Rate-limit
headers (``X-RateLimit-*``) on every answer, fixed-window buckets per route and channel, and
Discord's 429 body (``retry_after`` float, ``global``) with a ``Via`` header (without it
discord.py takes a 429 for a Cloudflare ban and does not retry). The gateway at ``/gateway``
speaks plain JSON text frames: HELLO, heartbeat ACKs, IDENTIFY -> READY + GUILD_CREATE,
RESUME -> replay of missed events + RESUMED, and dispatches with increasing ``s``.

    async with FakeDiscord() as fake:
        adapter = DiscordAdapter(fake.token, api_base=fake.api_base, gateway_url=fake.gateway_url, ...)
        fake.push_message(fake.channel_id, "hi", author_id=USER, author_name="ann", guild_id=fake.guild_id)
        await fake.wait_for_sent(1)
        fake.fail_next("POST /channels/{id}/messages", 429, retry_after=0.2)
"""

from __future__ import annotations

import asyncio
import io
import itertools
import re
import secrets
import time
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from PIL import Image, UnidentifiedImageError

from tests.fakes import discord_wire as wire
from tests.fakes.discord_interactions import InteractionDesk
from tests.fakes.discord_ws import GatewaySocket, Session
from tests.fakes.gate import SendGate

DISCORD_EPOCH_MS = 1_420_070_400_000
MAX_CONTENT = 2000
BOT_ID = 1_300_000_000_000_000_001
GUILD_ID = 1_300_000_000_000_000_100
CHANNEL_ID = 1_300_000_000_000_000_200
_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (method, re.compile(pattern), template)
    for method, pattern, template in (
        ("GET", r"^/users/@me$", "/users/@me"),
        ("GET", r"^/oauth2/applications/@me$", "/oauth2/applications/@me"),
        ("GET", r"^/gateway$", "/gateway"),
        ("GET", r"^/gateway/bot$", "/gateway/bot"),
        ("GET", r"^/channels/(\d+)$", "/channels/{id}"),
        ("POST", r"^/channels/(\d+)/messages$", "/channels/{id}/messages"),
        ("PATCH", r"^/channels/(\d+)/messages/(\d+)$", "/channels/{id}/messages/{message_id}"),
        ("POST", r"^/channels/(\d+)/typing$", "/channels/{id}/typing"),
    )
)


@dataclass(frozen=True, slots=True)
class FakeAttachment:
    """A file on a pushed message; served back at its ``url`` by the fake."""

    filename: str
    content: bytes
    content_type: str | None = None
    voice_seconds: float | None = None
    """Set for a voice message (Discord then sends ``duration_secs`` and a ``waveform``)."""


@dataclass(slots=True)
class SentMessage:
    """One message the bot created, as the fake stored it."""

    channel_id: int
    content: str
    message_reference: dict[str, Any] | None
    message_id: int
    payload: dict[str, Any]


@dataclass(slots=True)
class Edit:
    """One edit of a bot message (PATCH), with when it happened."""

    channel_id: int
    message_id: int
    content: str
    at: float


@dataclass(slots=True)
class ApiCall:
    method: str
    path: str
    status: int
    at: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class _Failure:
    status: int
    retry_after: float | None
    is_global: bool


class FakeDiscord(GatewaySocket):
    """The fake server plus helpers that play the users' side."""

    def __init__(
        self,
        *,
        token: str | None = None,
        bot_id: int = BOT_ID,
        bot_name: str = "hygieia",
        guilds: Mapping[int, Sequence[int]] | None = None,
        heartbeat_interval: int = 41_250,
        rate_limit: tuple[int, float] = (5, 5.0),
        shards: int = 1,
        port: int = 0,
    ) -> None:
        self.token = token or f"fake-discord-{secrets.token_urlsafe(24)}"  # one per fake: see FakeTelegram
        self.bot_user: dict[str, Any] = wire.user(bot_id, bot_name, bot=True)
        self.guilds: dict[int, list[int]] = {
            g: list(c) for g, c in (guilds or {GUILD_ID: [CHANNEL_ID]}).items()
        }
        self.heartbeat_interval = heartbeat_interval
        self.recommended_shards = shards  # what GET /gateway/bot advises
        self.sent: list[SentMessage] = []
        self.requests: list[ApiCall] = []
        self.typing: list[int] = []
        self.edits: list[Edit] = []
        self.identify_count = 0
        self.resume_count = 0
        self.heartbeats = 0
        self.identify_payloads: list[dict[str, Any]] = []
        self.identify_times: list[float] = []  # time.monotonic() of each IDENTIFY
        self._channels: dict[int, dict[str, Any]] = {}  # channel id -> channel object (DMs, threads too)
        self._messages: dict[int, dict[str, Any]] = {}  # message id -> message object
        self._files: dict[str, FakeAttachment] = {}
        self._sessions: dict[str, Session] = {}
        self._sockets: set[web.WebSocketResponse] = set()
        self._dropped: set[web.WebSocketResponse] = set()
        self.gate = SendGate()  # tests that kill clients hold it around the kill (tests/fakes/gate.py)
        self._failures: defaultdict[str, deque[_Failure]] = defaultdict(deque)
        self._buckets = wire.Buckets(*rate_limit)
        self._sent_changed = asyncio.Condition()
        self._last_snowflake = 0
        self._session_ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port = port  # 0: any free port (tests); a fixed one when run by hand
        self.port = 0
        self.slash = InteractionDesk(self)
        for guild_id, channel_ids in self.guilds.items():
            for position, channel_id in enumerate(channel_ids):
                self._channels[channel_id] = wire.text_channel(channel_id, guild_id, position)

    # --- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application()
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{key}/{filename}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for session in self._sessions.values():
            if session.outbox is not None:
                session.outbox.put_nowait(None)
        for ws in list(self._sockets):
            await ws.close(code=1001)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """What HYGIEIA_DISCORD_API_BASE would be set to (discord.py's ``Route.BASE``)."""
        return f"{self.root}/api/v10"

    @property
    def gateway_url(self) -> str:
        """What HYGIEIA_DISCORD_GATEWAY_URL would be set to."""
        return f"ws://127.0.0.1:{self.port}/gateway"

    @property
    def bot_id(self) -> int:
        return int(self.bot_user["id"])

    @property
    def bot_mention(self) -> str:
        return f"<@{self.bot_id}>"

    @property
    def guild_id(self) -> int:
        return next(iter(self.guilds))

    @property
    def channel_id(self) -> int:
        return self.guilds[self.guild_id][0]

    def snowflake(self) -> int:
        """A fresh, increasing Discord snowflake for the current time."""
        value = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
        self._last_snowflake = max(value, self._last_snowflake + 1)
        return self._last_snowflake

    # --- the users' side ------------------------------------------------------------------------

    def push_message(
        self,
        channel_id: int,
        content: str,
        *,
        author_id: int,
        author_name: str,
        guild_id: int | None = None,
        mentions_bot: bool = False,
        reply_to_bot: bool = False,
        thread: bool | int = False,
        attachments: Sequence[FakeAttachment] | None = None,
        author_is_bot: bool = False,
    ) -> dict[str, Any]:
        """Dispatch a realistic MESSAGE_CREATE and return its payload.

        ``guild_id=None`` is a DM (``channel_id`` is then the DM channel). ``mentions_bot`` puts
        ``<@bot>`` in front of the content unless it is already there. ``thread=True`` opens a
        new public thread under ``channel_id`` (THREAD_CREATE first) and posts in it; an int
        posts in that existing thread.
        """
        author = wire.user(author_id, author_name, bot=author_is_bot)
        if guild_id is None:
            self._channels.setdefault(channel_id, wire.dm_channel(channel_id, author))
        elif thread:
            channel_id = self._thread(channel_id, guild_id, author_id) if thread is True else int(thread)
        if mentions_bot and self.bot_mention not in content:
            content = f"{self.bot_mention} {content}"
        msg = self._message(channel_id, guild_id, author, content)
        if guild_id is not None:
            msg["member"] = wire.member()
        if mentions_bot:
            mentioned = dict(self.bot_user)
            if guild_id is not None:
                mentioned["member"] = wire.member()
            msg["mentions"] = [mentioned]
        if reply_to_bot:
            referenced = self._last_bot_message(channel_id, guild_id)
            msg["type"] = 19
            msg["message_reference"] = {
                "type": 0,
                "message_id": referenced["id"],
                "channel_id": str(channel_id),
            }
            if guild_id is not None:
                msg["message_reference"]["guild_id"] = str(guild_id)
            msg["referenced_message"] = referenced
        msg["attachments"] = [self._attachment(a) for a in attachments or ()]
        self._messages[int(msg["id"])] = msg
        self.dispatch("MESSAGE_CREATE", msg, guild_id=guild_id)
        return msg

    def push_edit(self, message: dict[str, Any], content: str) -> dict[str, Any]:
        """Dispatch MESSAGE_UPDATE for a pushed message with new content (a full message object)."""
        edited = {**message, "content": content, "edited_timestamp": wire.iso(datetime.now(UTC))}
        self._messages[int(edited["id"])] = edited
        guild = edited.get("guild_id")
        self.dispatch("MESSAGE_UPDATE", edited, guild_id=None if guild is None else int(guild))
        return edited

    def fail_next(
        self, route: str, status: int, *, retry_after: float = 1.0, is_global: bool = False, times: int = 1
    ) -> None:
        """Answer the next ``times`` requests to ``route`` with ``status`` instead of handling them.

        ``route`` is "METHOD /path" with the path either literal ("POST /channels/42/messages")
        or a template ("POST /channels/{id}/messages").
        """
        for _ in range(times):
            self._failures[route].append(_Failure(status, retry_after if status == 429 else None, is_global))

    async def wait_for_sent(self, n: int, timeout: float = 5.0) -> list[SentMessage]:  # noqa: ASYNC109
        async def enough() -> None:
            async with self._sent_changed:
                await self._sent_changed.wait_for(lambda: len(self.sent) >= n)

        try:
            await asyncio.wait_for(enough(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {n} sent messages (have {len(self.sent)})") from None
        return list(self.sent)

    # --- REST -----------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        method = request.method
        found = next(((t, m) for meth, rx, t in _ROUTES if meth == method and (m := rx.match(path))), None)
        authorized = request.headers.get("Authorization") == f"Bot {self.token}"
        if not authorized and self.slash.needs_bot_auth(path):
            return self._record(
                method, path, wire.json_response({"message": "401: Unauthorized", "code": 0}, 401)
            )
        if found is None:
            answered = await self.slash.handle(method, path, request)
            if answered is not None:
                return self._record(method, path, answered)
            return self._record(
                method, path, wire.json_response({"message": "404: Not Found", "code": 0}, 404)
            )
        template, match = found
        if method in ("POST", "PATCH") and "/messages" in template and not await self.gate.passage(request):
            return web.Response(status=499)
        bucket = f"{method} {template}:{match.group(1) if match.groups() else ''}"
        failure = self._take_failure(f"{method} {path}") or self._take_failure(f"{method} {template}")
        if failure is not None:
            return self._record(method, path, self._failure_response(failure, bucket))
        wait = self._buckets.take(bucket)
        if wait is not None:
            return self._record(method, path, self._failure_response(_Failure(429, wait, False), bucket))
        channel_id = int(match.group(1)) if match.groups() else None
        response = await self._handle(method, template, channel_id, request)
        self._buckets.stamp(response, bucket)
        return self._record(method, path, response)

    async def _handle(
        self, method: str, template: str, channel_id: int | None, request: web.Request
    ) -> web.Response:
        if template == "/users/@me":
            return wire.json_response(self.bot_user)
        if template == "/oauth2/applications/@me":
            return wire.json_response(wire.application(self.bot_user))
        if template == "/gateway":
            return wire.json_response({"url": self.gateway_url})
        if template == "/gateway/bot":
            limit = {"total": 1000, "remaining": 999, "reset_after": 86_400_000, "max_concurrency": 1}
            return wire.json_response(
                {"url": self.gateway_url, "shards": self.recommended_shards, "session_start_limit": limit}
            )
        assert channel_id is not None
        channel = self._channels.get(channel_id)
        if channel is None:
            return wire.json_response({"message": "Unknown Channel", "code": 10003}, 404)
        if template == "/channels/{id}":
            return wire.json_response(channel)
        if template == "/channels/{id}/typing":
            self.typing.append(channel_id)
            return web.Response(status=204)
        if method == "PATCH":
            message_id = int(request.match_info["path"].rsplit("/", 1)[1])
            return await self._edit_message(channel, message_id, await request.json())
        return await self._create_message(channel, await request.json())

    async def _create_message(self, channel: dict[str, Any], body: dict[str, Any]) -> web.Response:
        content = body.get("content") or ""
        if not content.strip() and not body.get("embeds"):
            return wire.json_response({"message": "Cannot send an empty message", "code": 50006}, 400)
        if len(content) > MAX_CONTENT:
            error = {"code": "BASE_TYPE_MAX_LENGTH", "message": f"Must be {MAX_CONTENT} or fewer in length."}
            return wire.invalid_form("content", error)
        reference = body.get("message_reference")
        channel_id = int(channel["id"])
        if reference is not None:
            target = self._messages.get(int(reference.get("message_id") or 0))
            if (target is None or int(target["channel_id"]) != channel_id) and reference.get(
                "fail_if_not_exists", True
            ):
                error = {"code": "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "message": "Unknown message"}
                return wire.invalid_form("message_reference", error)
        guild = channel.get("guild_id")
        msg = self._message(channel_id, None if guild is None else int(guild), self.bot_user, content)
        if reference is not None and int(reference.get("message_id") or 0) in self._messages:
            msg["type"] = 19
            msg["message_reference"] = {"type": 0, **reference}
            msg["referenced_message"] = self._messages[int(reference["message_id"])]
        self._messages[int(msg["id"])] = msg
        async with self._sent_changed:
            self.sent.append(SentMessage(channel_id, content, reference, int(msg["id"]), body))
            self._sent_changed.notify_all()
        self.dispatch(
            "MESSAGE_CREATE", msg, guild_id=None if guild is None else int(guild)
        )  # as Discord echoes it
        return wire.json_response(msg)

    async def _edit_message(
        self, channel: dict[str, Any], message_id: int, body: dict[str, Any]
    ) -> web.Response:
        """PATCH /channels/{id}/messages/{id}: only the bot's own messages, within the content limit."""
        msg = self._messages.get(message_id)
        if msg is None or msg["channel_id"] != channel["id"]:
            return wire.json_response({"message": "Unknown Message", "code": 10008}, 404)
        if msg["author"]["id"] != self.bot_user["id"]:
            return wire.json_response(
                {"message": "Cannot edit a message authored by another user", "code": 50005}, 403
            )
        content = body.get("content")
        if content is not None:
            if not str(content).strip() and not msg.get("embeds"):
                return wire.json_response({"message": "Cannot send an empty message", "code": 50006}, 400)
            if len(str(content)) > MAX_CONTENT:
                error = {
                    "code": "BASE_TYPE_MAX_LENGTH",
                    "message": f"Must be {MAX_CONTENT} or fewer in length.",
                }
                return wire.invalid_form("content", error)
            msg["content"] = str(content)
        msg["edited_timestamp"] = wire.iso_now()
        for sent in self.sent:  # ``sent`` shows what the user sees now
            if sent.message_id == message_id:
                sent.content = msg["content"]
        async with self._sent_changed:
            self.edits.append(Edit(int(channel["id"]), message_id, msg["content"], time.monotonic()))
            self._sent_changed.notify_all()
        guild = channel.get("guild_id")
        self.dispatch("MESSAGE_UPDATE", msg, guild_id=None if guild is None else int(guild))
        return wire.json_response(msg)

    def current_text(self, message_id: int) -> str:
        """What a message shows now (after the bot's edits)."""
        return str(self._messages[message_id]["content"])

    def _take_failure(self, key: str) -> _Failure | None:
        queue = self._failures.get(key)
        return queue.popleft() if queue else None

    def _failure_response(self, failure: _Failure, bucket: str) -> web.Response:
        if failure.status != 429:
            # Discord's own bodies for the refusals a bot meets most (JSON error codes 50001, 10003).
            message, code = {403: ("Missing Access", 50001), 404: ("Unknown Channel", 10003)}.get(
                failure.status, (f"{failure.status}: Server Error", 0)
            )
            return wire.json_response({"message": message, "code": code}, failure.status)
        retry_after = failure.retry_after or 1.0
        response = wire.rate_limited(retry_after, is_global=failure.is_global)
        self._buckets.stamp(response, bucket, remaining=0, reset_after=retry_after)
        return response

    def _record(self, method: str, path: str, response: web.Response) -> web.Response:
        self.requests.append(ApiCall(method, path, response.status))
        return response

    async def _download(self, request: web.Request) -> web.Response:
        found = self._files.get(request.match_info["key"])
        if found is None or found.filename != request.match_info["filename"]:
            return web.Response(status=404)
        mime = found.content_type or "application/octet-stream"
        return web.Response(body=found.content, headers={"Content-Type": mime})

    # --- payloads -------------------------------------------------------------------------------

    def _guild(self, guild_id: int) -> dict[str, Any]:
        channels = [c for c in self._channels.values() if c.get("guild_id") == str(guild_id)]
        return wire.guild(guild_id, channels, self.bot_user)

    def _message(
        self, channel_id: int, guild_id: int | None, author: dict[str, Any], content: str
    ) -> dict[str, Any]:
        return wire.message(self.snowflake(), channel_id, guild_id, author, content)

    def _thread(self, parent_id: int, guild_id: int, owner_id: int) -> int:
        thread_id = self.snowflake()
        thread = wire.thread(thread_id, parent_id, guild_id, owner_id)
        self._channels[thread_id] = thread
        self.dispatch("THREAD_CREATE", {**thread, "newly_created": True}, guild_id=guild_id)
        return thread_id

    def channel_payload(self, channel_id: int, user: dict[str, Any]) -> dict[str, Any]:
        """The channel object of ``channel_id`` (a DM with ``user`` when it is not known yet)."""
        return self._channels.setdefault(channel_id, wire.dm_channel(channel_id, user))

    def _last_bot_message(self, channel_id: int, guild_id: int | None) -> dict[str, Any]:
        for sent in reversed(self.sent):
            if sent.channel_id == channel_id:
                return self._messages[sent.message_id]
        earlier = self._message(channel_id, guild_id, self.bot_user, "an earlier answer")
        self._messages[int(earlier["id"])] = earlier
        return earlier

    def _attachment(self, attachment: FakeAttachment) -> dict[str, Any]:
        key = str(self.snowflake())
        self._files[key] = attachment
        url = f"{self.root}/attachments/{key}/{attachment.filename}"
        data: dict[str, Any] = {
            "id": key,
            "filename": attachment.filename,
            "size": len(attachment.content),
            "url": url,
            "proxy_url": url,
        }
        if attachment.content_type is not None:
            data["content_type"] = attachment.content_type
        if attachment.voice_seconds is not None:
            data["duration_secs"] = attachment.voice_seconds
            data["waveform"] = "AAAAAAAAAAAA"  # base64 of the amplitude samples
        try:  # Discord gives a picture's size
            with Image.open(io.BytesIO(attachment.content)) as image:
                data["width"], data["height"] = image.size
        except (UnidentifiedImageError, OSError):
            pass
        return data
