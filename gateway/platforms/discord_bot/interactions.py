"""Discord application commands: registering them, and answering their interactions in time.

Registration (on start, when ``discord.slash_commands`` is on): the commands the gateway offers
(:class:`CommandSpec`) become Discord application commands, in the guilds of
``discord.command_guild_ids`` (they show at once: for development) or globally. What Discord
already has is read first and overwritten only when it differs, so a restart writes nothing.

Answering. An interaction becomes an :class:`InboundMessage` whose text is the command line
(``/compact budget``) and whose message id is ``interaction:<id>``: it goes through the durable
inbox and the same command code as a typed command, and its answer is an outbox row like any
other (so it is recorded, and delivered by the outbox worker). The adapter's ``send`` recognises
the ``interaction:`` target and answers through the interaction instead of posting:

- answered within ``interaction_defer_seconds`` (< Discord's 3 s): the answer is the initial
  response (callback type 4), ephemeral for :attr:`CommandSpec.private` commands in guilds;
- otherwise (a slow command, or one queued behind a running turn) the interaction is
  acknowledged first (type 5, "thinking...") and the answer edits that message, with
  followups for further parts;
- an interaction we no longer hold (a restart) or whose 15-minute token expired: the answer is
  posted to the channel as an ordinary message, so it is never lost; except the answer to a
  private command in a guild (ephemeral: /context, /usage...), which is for the caller only: the
  channel gets one line asking them to run it again, never the answer. The interaction tokens
  live in memory only (see docs/chat.md, "Known limit: Discord interaction tokens live in memory only").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import discord

from gateway.errors import AdapterError
from gateway.platforms.base import CommandSpec, InboundMessage, OutboundTarget
from gateway.platforms.discord_bot.inbound import PLATFORM

_log = logging.getLogger(__name__)

PREFIX = "interaction:"
# Marks the message id of a command whose answer is only for the caller (ephemeral in a guild):
# after a restart the adapter can tell, from the stored reply target alone, not to post it.
PRIVATE = "private:"
LOST_PRIVATE_ANSWER = "I could not answer your command privately this time; please run it again."
TOKEN_LIFETIME = 15 * 60.0
TOKEN_MARGIN = 30.0
STRING_OPTION = 3
CHAT_INPUT = 1
_ERRORS = (discord.HTTPException, aiohttp.ClientError, OSError, asyncio.TimeoutError)


def command_payload(spec: CommandSpec) -> dict[str, Any]:
    """The application command JSON for ``spec`` (a CHAT_INPUT command)."""
    payload: dict[str, Any] = {"name": spec.name, "description": spec.description, "type": CHAT_INPUT}
    if spec.argument:
        payload["options"] = [
            {
                "type": STRING_OPTION,
                "name": spec.argument,
                "description": spec.argument_description or spec.argument,
                "required": spec.argument_required,
            }
        ]
    return payload


def _shape(command: dict[str, Any]) -> tuple[Any, ...]:
    """What we set on a command, ignoring what Discord adds (ids, versions, permissions)."""
    options = tuple(
        (o.get("type"), o.get("name"), o.get("description"), bool(o.get("required", False)))
        for o in command.get("options") or ()
    )
    return (command.get("name"), command.get("description"), command.get("type", CHAT_INPUT), options)


async def register_commands(
    client: discord.Client, specs: list[CommandSpec], guild_ids: list[int] | None
) -> int:
    """Make Discord's command list equal ``specs``; returns how many scopes were overwritten."""
    app_id = client.application_id
    if app_id is None:
        raise AdapterError("Discord: no application id after login; cannot register slash commands")
    wanted = [command_payload(spec) for spec in specs]
    wanted_shape = sorted(_shape(c) for c in wanted)
    written = 0
    scopes: list[int | None] = list(guild_ids) if guild_ids else [None]
    for guild_id in scopes:
        if guild_id is None:
            current = await client.http.get_global_commands(app_id)
        else:
            current = await client.http.get_guild_commands(app_id, guild_id)
        if sorted(_shape(dict(c)) for c in current) == wanted_shape:
            continue
        if guild_id is None:
            await client.http.bulk_upsert_global_commands(app_id, wanted)
        else:
            await client.http.bulk_upsert_guild_commands(app_id, guild_id, wanted)
        written += 1
    return written


def command_line(interaction: discord.Interaction) -> str:
    """``/name value`` for a slash command interaction (its option values joined).

    A client with a stale command list can send any option shape: only scalar values count
    (a list or object is ignored, as if the option were missing; never its Python repr)."""
    data: dict[str, Any] = dict(interaction.data or {})
    values = [_option_text(o.get("value")) for o in data.get("options") or () if isinstance(o, dict)]
    return " ".join([f"/{data.get('name', '')}", *(v for v in values if v)]).strip()


def _option_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return ""


def interaction_key(ref: str) -> str:
    """The interaction id in a reply target's ``interaction:[private:]<id>``."""
    return ref.removeprefix(PREFIX).removeprefix(PRIVATE)


def is_private(ref: str) -> bool:
    """Whether the reply target answers a private command (only the caller may see it)."""
    return ref.startswith(PREFIX + PRIVATE)


def to_inbound(interaction: discord.Interaction, *, private: bool = False) -> InboundMessage:
    """The command message for ``interaction``: addressed to us, id ``interaction:<id>``
    (``interaction:private:<id>`` when its answer is for the caller only)."""
    channel_id = interaction.channel_id or 0
    thread_id: str | None = None
    chat_id = str(channel_id)
    if interaction.guild_id is None:
        chat_type = "dm"
    else:
        chat_type = "group"
        channel = interaction.channel
        if isinstance(channel, discord.Thread) and channel.parent_id:
            chat_id, thread_id = str(channel.parent_id), str(channel_id)
    return InboundMessage(
        platform=PLATFORM,
        chat_id=chat_id,
        user_id=str(interaction.user.id),
        text=command_line(interaction),
        platform_message_id=f"{PREFIX}{PRIVATE if private else ''}{interaction.id}",
        thread_id=thread_id,
        user_name=interaction.user.display_name,
        chat_type=chat_type,  # type: ignore[arg-type]
        addressed=True,
        timestamp=interaction.created_at,
    )


@dataclass(slots=True)
class _Pending:
    interaction: discord.Interaction
    ephemeral: bool
    received: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    state: str = "new"  # new -> deferred | answered; deferred -> answered (original edited)
    timer: asyncio.Task[None] | None = None

    def expired(self) -> bool:
        return time.monotonic() - self.received > TOKEN_LIFETIME - TOKEN_MARGIN


class Interactions:
    """The interactions this process received and has not finished answering."""

    def __init__(self, specs: list[CommandSpec], defer_after: float) -> None:
        self._specs = {spec.name: spec for spec in specs}
        self._defer_after = defer_after
        self._pending: dict[str, _Pending] = {}

    def spec(self, interaction: discord.Interaction) -> CommandSpec | None:
        data: dict[str, Any] = dict(interaction.data or {})
        return self._specs.get(str(data.get("name", "")))

    async def received(self, interaction: discord.Interaction) -> bool:
        """Hold ``interaction`` for its answer; False (and a short answer) when it is not ours."""
        self._forget_expired()
        spec = self.spec(interaction)
        if interaction.type is not discord.InteractionType.application_command or spec is None:
            with contextlib.suppress(*_ERRORS):
                await interaction.response.send_message("I don't know that command.", ephemeral=True)
            return False
        pending = _Pending(interaction, ephemeral=spec.private and interaction.guild_id is not None)
        self._pending[str(interaction.id)] = pending
        if spec.slow:
            await self._defer(pending)
        else:
            pending.timer = asyncio.create_task(self._defer_later(pending), name="discord-defer")
        return True

    def to_inbound(self, interaction: discord.Interaction) -> InboundMessage:
        """The command message, marked private when its answer is ephemeral (a private command in
        a guild; in a DM only the caller sees it anyway)."""
        spec = self.spec(interaction)
        private = spec is not None and spec.private and interaction.guild_id is not None
        return to_inbound(interaction, private=private)

    async def failed(self, interaction: discord.Interaction) -> None:
        """The gateway could not take the command: say so rather than leave "thinking..." forever."""
        await self.answer(str(interaction.id), "I couldn't take that command just now; please try again.")

    def holds(self, target: OutboundTarget) -> bool:
        """True when ``target`` answers an interaction we can still answer through Discord."""
        ref = target.reply_to_message_id or ""
        pending = self._pending.get(interaction_key(ref)) if ref.startswith(PREFIX) else None
        return pending is not None and not pending.expired()

    async def answer(self, interaction_id: str, text: str) -> list[str]:
        """Answer (or continue answering) the interaction; returns the Discord message ids."""
        pending = self._pending[interaction_id]
        async with pending.lock:
            if pending.timer is not None:
                pending.timer.cancel()
            try:
                return [await self._respond(pending, text)]
            except _ERRORS as exc:
                raise AdapterError(f"Discord: answering interaction {interaction_id} failed: {exc}") from exc

    async def _respond(self, pending: _Pending, text: str) -> str:
        interaction = pending.interaction
        if pending.state == "new":
            pending.state = "answered"
            response = await interaction.response.send_message(text, ephemeral=pending.ephemeral)
            return str(response.message_id or "")
        if pending.state == "deferred":
            pending.state = "answered"
            message = await interaction.edit_original_response(content=text)
            return str(message.id)
        sent = await interaction.followup.send(text, ephemeral=pending.ephemeral, wait=True)
        return str(sent.id)

    async def _defer_later(self, pending: _Pending) -> None:
        await asyncio.sleep(self._defer_after)
        async with pending.lock:
            if pending.state == "new":
                await self._defer(pending)

    async def _defer(self, pending: _Pending) -> None:
        try:
            await pending.interaction.response.defer(ephemeral=pending.ephemeral, thinking=True)
        except _ERRORS as exc:
            _log.warning("discord: could not acknowledge interaction %s: %s", pending.interaction.id, exc)
            return
        pending.state = "deferred"

    def _forget_expired(self) -> None:
        for key in [k for k, p in self._pending.items() if p.expired()]:
            del self._pending[key]

    def close(self) -> None:
        for pending in self._pending.values():
            if pending.timer is not None:
                pending.timer.cancel()
        self._pending.clear()
