"""The platform adapters the settings and ``--platform`` ask for, and the intakes to elect."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from agent.errors import ConfigError
from gateway.cluster.election import IntakeSlot
from gateway.cluster.roles import intake_lease
from gateway.config import Settings
from gateway.platforms.base import PlatformAdapter
from gateway.platforms.console.adapter import ConsoleAdapter
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from gateway.platforms.telegram_bot.adapter import TelegramAdapter
from gateway.serving.commands import command_specs


def build_adapters(settings: Settings, platforms: Sequence[str] | None) -> list[PlatformAdapter]:
    """Adapters for ``platforms``; without a list, every platform whose token is set, else the console.

    Asking for a platform whose token is not set is a configuration error, not a silent skip.
    """
    wanted = list(platforms) if platforms else []
    if not wanted:
        if settings.telegram_bot_token is not None:
            wanted.append("telegram")
        if settings.discord_bot_token is not None:
            wanted.append("discord")
        if not wanted:
            wanted.append("console")
    adapters: list[PlatformAdapter] = []
    for name in dict.fromkeys(wanted):
        if name == "console":
            adapters.append(ConsoleAdapter())
        elif name == "telegram":
            if settings.telegram_bot_token is None:
                raise ConfigError("TELEGRAM_BOT_TOKEN: not set, but --platform telegram was asked for")
            adapters.append(
                TelegramAdapter(
                    settings.telegram_bot_token.get_secret_value(),
                    base_url=settings.telegram_base_url,
                    settings=settings.telegram,
                )
            )
        elif name == "discord":
            if settings.discord_bot_token is None:
                raise ConfigError("DISCORD_BOT_TOKEN: not set, but --platform discord was asked for")
            adapters.append(
                DiscordAdapter(
                    settings.discord_bot_token.get_secret_value(),
                    api_base=settings.discord_api_base,
                    gateway_url=settings.discord_gateway_url,
                    settings=settings.discord,
                    guild_ready_timeout=settings.discord.guild_ready_timeout,
                    commands=command_specs(),
                )
            )
        else:
            raise ConfigError(f"--platform: unknown platform {name!r}; choose console, telegram or discord")
    return adapters


def chats_on_this_terminal(
    settings: Settings, platforms: Sequence[str] | None, stdin: Any = None, stderr: Any = None
) -> bool:
    """True when the console will run and a person reads this terminal: they type on it, or the
    replies to piped input and stderr share it. The log then goes to the log file, not between
    the replies."""
    streams = (stdin if stdin is not None else sys.stdin, stderr if stderr is not None else sys.stderr)
    if not any(hasattr(stream, "isatty") and stream.isatty() for stream in streams):
        return False
    if platforms:
        return "console" in platforms
    return settings.telegram_bot_token is None and settings.discord_bot_token is None


def intake_slots(adapters: Sequence[PlatformAdapter]) -> list[IntakeSlot]:
    """One elected intake per platform that can send on its own (Telegram, Discord); the leader
    (re)starts the given adapter (adapters are restartable after ``stop``).

    The hook for Discord sharding: a slot is a lease name plus a builder, so one slot per shard
    group (lease ``intake:discord:<ids>``, building a DiscordAdapter with those shard ids) lets
    each group be led by a different process.
    """

    def same(adapter: PlatformAdapter) -> Callable[[], PlatformAdapter]:
        return lambda: adapter

    return [IntakeSlot(intake_lease(a.name), a.name, same(a)) for a in adapters if a.sends_alone]
