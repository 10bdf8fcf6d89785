"""Discord's application commands and interaction flow, for :class:`tests.fakes.discord.FakeDiscord`.

As Discord does it:
- commands: ``GET/PUT /applications/{app}/commands`` and ``.../guilds/{guild}/commands`` (bot
  auth; names ``^[-_a-z0-9]{1,32}$``, descriptions 1-100 characters, options typed);
- an invocation is an ``INTERACTION_CREATE`` dispatch with an id and a token;
- ``POST /interactions/{id}/{token}/callback`` (no bot auth) must come within **3 seconds** of
  the interaction, once: type 4 (a message) or 5 (deferred, "thinking..."); later -> 404
  "Unknown interaction" (10062); a second one -> 400 "already acknowledged" (40060);
- the token then works for **15 minutes** on ``/webhooks/{app}/{token}``: ``PATCH
  .../messages/@original`` edits the response, ``POST`` adds followups; after that 401
  "Invalid Webhook Token" (50027). A followup before any response is 404 "Unknown Webhook".
``advance(seconds)`` moves the fake's clock for the interactions, so tests need not wait.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakes import discord_wire as wire

if TYPE_CHECKING:
    from tests.fakes.discord import FakeDiscord

RESPONSE_DEADLINE = 3.0
TOKEN_LIFETIME = 15 * 60.0
EPHEMERAL, LOADING = 1 << 6, 1 << 7
_NAME = re.compile(r"^[-_a-z0-9]{1,32}$")
_COMMANDS = re.compile(r"^/applications/(\d+)(?:/guilds/(\d+))?/commands$")
_CALLBACK = re.compile(r"^/interactions/(\d+)/([^/]+)/callback$")
_WEBHOOK = re.compile(r"^/webhooks/(\d+)/([^/]+)(?:/messages/(@original|\d+))?$")


@dataclass(slots=True)
class FakeInteraction:
    """One slash command invocation and everything the bot answered to it."""

    id: int
    token: str
    name: str
    options: dict[str, str]
    channel_id: int
    guild_id: int | None
    created: float
    user: dict[str, Any] = field(default_factory=dict)
    callbacks: list[tuple[int, float, int]] = field(default_factory=list)  # (status, seconds after, type)
    original: dict[str, Any] | None = None
    followups: list[dict[str, Any]] = field(default_factory=list)
    edits: int = 0
    raw_options: list[dict[str, Any]] | None = None  # sent verbatim instead of ``options``

    @property
    def answered_type(self) -> int | None:
        ok = [kind for status, _, kind in self.callbacks if status < 300]
        return ok[0] if ok else None

    @property
    def ephemeral(self) -> bool:
        return bool(self.original and int(self.original.get("flags", 0)) & EPHEMERAL)

    @property
    def texts(self) -> list[str]:
        """What the user sees: the response (once no longer "thinking...") and the followups."""
        shown = [] if self.original is None or self.loading else [str(self.original["content"])]
        return shown + [str(f["content"]) for f in self.followups]

    @property
    def loading(self) -> bool:
        return bool(self.original and int(self.original.get("flags", 0)) & LOADING)


class InteractionDesk:
    """The interaction half of the fake Discord (commands, callbacks, interaction webhooks)."""

    def __init__(self, fake: FakeDiscord) -> None:
        self._fake = fake
        self.commands: dict[int | None, list[dict[str, Any]]] = {}  # None: global
        self.command_writes: list[int | None] = []
        self.interactions: dict[int, FakeInteraction] = {}
        self._skew = 0.0
        self._changed = asyncio.Condition()

    def now(self) -> float:
        return time.monotonic() + self._skew

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass for every interaction deadline and token."""
        self._skew += seconds

    # --- the user's side ------------------------------------------------------------------------

    def invoke(
        self,
        name: str,
        *,
        user_id: int,
        user_name: str,
        channel_id: int,
        guild_id: int | None = None,
        options: dict[str, str] | None = None,
        raw_options: list[dict[str, Any]] | None = None,
        stale: bool = False,
    ) -> FakeInteraction:
        """A user runs ``/name``: dispatch INTERACTION_CREATE as Discord would.

        ``raw_options`` go out verbatim (wrong types, unknown names, no value): what a client
        with a stale command list sends, since Discord checks options against the command the
        client knew. ``stale`` invokes a command no longer registered (the id of a deleted one).
        """
        fake = self._fake
        scope = self.commands.get(guild_id, []) + self.commands.get(None, [])
        command = next((c for c in scope if c["name"] == name), None)
        if command is None and stale:
            command = {"id": str(fake.snowflake()), "name": name}
        if command is None:
            raise AssertionError(f"/{name} is not registered (have {[c['name'] for c in scope]})")
        interaction = FakeInteraction(
            fake.snowflake(),
            "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(48),
            name,
            dict(options or {}),
            channel_id,
            guild_id,
            self.now(),
            wire.user(user_id, user_name),
            raw_options=raw_options,
        )
        self.interactions[interaction.id] = interaction
        fake.dispatch(
            "INTERACTION_CREATE", self._payload(interaction, command, user_id, user_name), guild_id=guild_id
        )
        return interaction

    async def wait_until(self, interaction: FakeInteraction, texts: int = 1, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Until the user sees ``texts`` answers to ``interaction``."""

        async def enough() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(interaction.texts) >= texts)

        try:
            await asyncio.wait_for(enough(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"/{interaction.name}: no answer in {timeout} s (callbacks {interaction.callbacks})"
            ) from None

    # --- REST -----------------------------------------------------------------------------------

    def needs_bot_auth(self, path: str) -> bool:
        return not (_CALLBACK.match(path) or _WEBHOOK.match(path))

    async def handle(self, method: str, path: str, request: web.Request) -> web.Response | None:
        """Answer ``method path`` when it is an interaction or command route; None otherwise."""
        if match := _COMMANDS.match(path):
            return await self._commands(method, match, request)
        if (match := _CALLBACK.match(path)) and method == "POST":
            return await self._callback(int(match.group(1)), match.group(2), request)
        if match := _WEBHOOK.match(path):
            return await self._webhook(method, match, request)
        return None

    async def _commands(self, method: str, match: re.Match[str], request: web.Request) -> web.Response:
        if int(match.group(1)) != self._fake.bot_id:
            return wire.json_response({"message": "Unknown Application", "code": 10002}, 404)
        guild = int(match.group(2)) if match.group(2) else None
        if guild is not None and guild not in self._fake.guilds:
            return wire.json_response({"message": "Missing Access", "code": 50001}, 403)
        if method == "GET":
            return wire.json_response(self.commands.get(guild, []))
        if method != "PUT":
            return wire.json_response({"message": "405: Method Not Allowed", "code": 0}, 405)
        body = await request.json()
        problem = _invalid_commands(body)
        if problem is not None:
            return wire.invalid_form(problem[0], {"code": "INVALID", "message": problem[1]})
        self.command_writes.append(guild)
        self.commands[guild] = [self._stored(c, guild) for c in body]
        return wire.json_response(self.commands[guild])

    def _stored(self, command: dict[str, Any], guild: int | None) -> dict[str, Any]:
        stored = {
            "id": str(self._fake.snowflake()),
            "application_id": str(self._fake.bot_id),
            "version": str(self._fake.snowflake()),
            "type": command.get("type", 1),
            "name": command["name"],
            "description": command["description"],
            "options": command.get("options", []),
            "default_member_permissions": None,
            "dm_permission": True,
            "nsfw": False,
            "integration_types": [0],
            "contexts": None,
        }
        if guild is not None:
            stored["guild_id"] = str(guild)
        return stored

    async def _callback(self, interaction_id: int, token: str, request: web.Request) -> web.Response:
        interaction = self.interactions.get(interaction_id)
        if interaction is None or interaction.token != token:
            return wire.json_response({"message": "Unknown interaction", "code": 10062}, 404)
        body = await request.json()
        kind = int(body.get("type", 0))
        after = self.now() - interaction.created
        if after > RESPONSE_DEADLINE:
            return self._note(
                interaction, 404, after, kind, {"message": "Unknown interaction", "code": 10062}
            )
        if interaction.answered_type is not None:
            error = {"message": "Interaction has already been acknowledged.", "code": 40060}
            return self._note(interaction, 400, after, kind, error)
        if kind not in (4, 5):
            return self._note(interaction, 400, after, kind, {"message": "Invalid interaction response type"})
        data = body.get("data") or {}
        flags = int(data.get("flags", 0))
        if kind == 4:
            problem = _invalid_content(data)
            if problem is not None:
                return self._note(interaction, 400, after, kind, problem)
            content = str(data["content"])
        else:
            content, flags = "", flags | LOADING
        interaction.original = self._message(interaction, content, flags)
        self._note(interaction, 200, after, kind, None)
        await self._notify()
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        return wire.json_response(
            {
                "interaction": {
                    "id": str(interaction.id),
                    "type": 2,
                    "activity_instance_id": None,
                    "response_message_id": interaction.original["id"],
                    "response_message_loading": kind == 5,
                    "response_message_ephemeral": bool(flags & EPHEMERAL),
                },
                "resource": {"type": kind, "message": interaction.original},
            }
        )

    async def _webhook(self, method: str, match: re.Match[str], request: web.Request) -> web.Response:
        app_id, token, which = int(match.group(1)), match.group(2), match.group(3)
        interaction = next((i for i in self.interactions.values() if i.token == token), None)
        if interaction is None or app_id != self._fake.bot_id:
            return wire.json_response({"message": "Unknown Webhook", "code": 10015}, 404)
        if self.now() - interaction.created > TOKEN_LIFETIME:
            return wire.json_response({"message": "Invalid Webhook Token", "code": 50027}, 401)
        if interaction.original is None:
            return wire.json_response({"message": "Unknown Webhook", "code": 10015}, 404)
        if method == "GET" and which == "@original":
            return wire.json_response(interaction.original)
        body = await request.json() if request.can_read_body else {}
        problem = _invalid_content(body)
        if problem is not None:
            return wire.json_response(problem, 400)
        if method == "PATCH" and which is not None:
            found = interaction.original if which == "@original" else _find(interaction.followups, which)
            if found is None:
                return wire.json_response({"message": "Unknown Message", "code": 10008}, 404)
            found["content"] = str(body["content"])
            found["flags"] = int(found.get("flags", 0)) & ~LOADING
            found["edited_timestamp"] = wire.iso_now()
            interaction.edits += 1
            await self._notify()
            return wire.json_response(found)
        if method == "POST" and which is None:
            followup = self._message(interaction, str(body["content"]), int(body.get("flags", 0)))
            interaction.followups.append(followup)
            await self._notify()
            if request.query.get("wait") in ("1", "true", "True"):
                return wire.json_response(followup)
            return web.Response(status=204)
        return wire.json_response({"message": "405: Method Not Allowed", "code": 0}, 405)

    # --- payloads -------------------------------------------------------------------------------

    def _payload(
        self, interaction: FakeInteraction, command: dict[str, Any], user_id: int, user_name: str
    ) -> dict[str, Any]:
        fake = self._fake
        user = interaction.user
        channel = fake.channel_payload(interaction.channel_id, user)
        data: dict[str, Any] = {"id": command["id"], "name": interaction.name, "type": 1}
        if interaction.raw_options is not None:
            data["options"] = interaction.raw_options
        elif interaction.options:
            data["options"] = [{"name": k, "type": 3, "value": v} for k, v in interaction.options.items()]
        payload: dict[str, Any] = {
            "id": str(interaction.id),
            "application_id": str(fake.bot_id),
            "type": 2,
            "data": data,
            "channel": channel,
            "channel_id": str(interaction.channel_id),
            "token": interaction.token,
            "version": 1,
            "app_permissions": str((1 << 41) - 1),
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if interaction.guild_id is not None:
            payload["guild_id"] = str(interaction.guild_id)
            payload["guild_locale"] = "en-US"
            payload["member"] = {**wire.member(), "user": user, "permissions": str((1 << 41) - 1)}
            payload["context"] = 0
        else:
            payload["user"] = user
            payload["context"] = 1
        payload["authorizing_integration_owners"] = owners(interaction)
        return payload

    def _message(self, interaction: FakeInteraction, content: str, flags: int) -> dict[str, Any]:
        message = wire.message(
            self._fake.snowflake(), interaction.channel_id, interaction.guild_id, self._fake.bot_user, content
        )
        message.update(
            {
                "flags": flags,
                "type": 20,
                "application_id": str(self._fake.bot_id),
                "webhook_id": str(self._fake.bot_id),
                "interaction_metadata": {
                    "id": str(interaction.id),
                    "type": 2,
                    "name": interaction.name,
                    "user": interaction.user,
                    "authorizing_integration_owners": owners(interaction),
                },
            }
        )
        return message

    def _note(
        self, interaction: FakeInteraction, status: int, after: float, kind: int, error: dict[str, Any] | None
    ) -> web.Response:
        interaction.callbacks.append((status, after, kind))
        return wire.json_response(error or {}, status)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


def owners(interaction: FakeInteraction) -> dict[str, str]:
    """Guild install (0) in a guild, user install (1) in a DM."""
    if interaction.guild_id is not None:
        return {"0": str(interaction.guild_id)}
    return {"1": str(interaction.user["id"])}


def _find(messages: list[dict[str, Any]], message_id: str) -> dict[str, Any] | None:
    return next((m for m in messages if m["id"] == message_id), None)


def _invalid_content(data: dict[str, Any]) -> dict[str, Any] | None:
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        return {"message": "Cannot send an empty message", "code": 50006}
    if len(content) > 2000:
        return {"message": "Invalid Form Body", "code": 50035, "errors": {"content": {"_errors": []}}}
    return None


def _invalid_commands(body: Any) -> tuple[str, str] | None:
    if not isinstance(body, list) or len(body) > 100:
        return "commands", "a list of at most 100 commands"
    names = [c.get("name") for c in body]
    if len(set(names)) != len(names):
        return "name", "command names must be unique"
    for index, command in enumerate(body):
        if not _NAME.match(str(command.get("name", ""))):
            return f"{index}.name", "must match ^[-_a-z0-9]{1,32}$"
        if not 1 <= len(str(command.get("description", ""))) <= 100:
            return f"{index}.description", "must be 1-100 characters"
        for option in command.get("options") or []:
            if option.get("type") not in range(1, 12) or not _NAME.match(str(option.get("name", ""))):
                return f"{index}.options", "invalid option"
            if not 1 <= len(str(option.get("description", ""))) <= 100:
                return f"{index}.options.description", "must be 1-100 characters"
    return None
