"""The platform adapters the settings and ``--platform`` ask for, and the intakes to elect."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent.errors import ConfigError
from gateway.cluster.election import IntakeSlot
from gateway.cluster.roles import intake_lease, runs_intake
from gateway.config import Settings
from gateway.config.webhooks import missing_secrets
from gateway.platforms.base import PlatformAdapter
from gateway.platforms.console.adapter import ConsoleAdapter
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from gateway.platforms.http_api.adapter import ApiAdapter
from gateway.platforms.http_api.keys import ApiKeys
from gateway.platforms.telegram_bot.adapter import TelegramAdapter
from gateway.platforms.webhooks.adapter import WebhooksAdapter
from gateway.runner.listener import DoorListener
from gateway.serving.commands import command_specs

_log = logging.getLogger(__name__)


def build_adapters(
    settings: Settings,
    platforms: Sequence[str] | None,
    role: str = "all",
    *,
    door: DoorListener | None = None,
) -> list[PlatformAdapter]:
    """Adapters for ``platforms``; without a list, every platform whose token (or key, or route) is
    set, else the console.

    Asking for a platform whose token is not set is a configuration error, not a silent skip. The
    ways in that speak HTTP share ``door`` (one is made on ``api.host``/``api.port`` when not given).
    A ``worker`` node serves no webhooks: it builds no webhooks adapter (nor needs the secrets).
    """
    wanted = list(platforms) if platforms else []
    if not wanted:
        if settings.telegram_bot_token is not None:
            wanted.append("telegram")
        if settings.discord_bot_token is not None:
            wanted.append("discord")
        if settings.api_keys is not None:
            wanted.append("api")
        if settings.webhooks.routes:
            wanted.append("webhooks")
        if not wanted:
            wanted.append("console")
    if "webhooks" in wanted:
        wanted.extend(webhook_targets(settings))
    doors = Doors(settings, door)
    adapters: list[PlatformAdapter] = []
    for name in dict.fromkeys(wanted):
        if name == "api":
            if settings.api_keys is None:
                raise ConfigError("HYGIEIA_API_KEYS: not set, but --platform api was asked for")
            if role != "all":
                # The answer comes back on the request waiting in this process, so only a node that
                # also serves turns can answer it; elsewhere a request would wait for nothing.
                if "api" in (platforms or []):
                    raise ConfigError(
                        f"--platform api answers on nodes of role all, not {role} (docs/api.md)"
                    )
                _log.warning("HYGIEIA_API_KEYS is set, but the API runs only on nodes of role all")
                continue
            keys = ApiKeys.parse(settings.api_keys.get_secret_value())
            adapters.append(ApiAdapter(keys, doors.listener(), max_chars=settings.sessions.max_inbound_chars))
        elif name == "console":
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
                    commands=command_specs(),
                )
            )
        elif name == "webhooks":
            if runs_intake(role):  # type: ignore[arg-type]  # checked by check_role before
                adapters.append(build_webhooks(settings, doors.listener()))
        else:
            raise ConfigError(
                f"--platform: unknown platform {name!r}; choose console, telegram, discord, api or webhooks"
            )
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
    return (
        settings.telegram_bot_token is None
        and settings.discord_bot_token is None
        and settings.api_keys is None
        and not settings.webhooks.routes
    )


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


# The HTTP ways in ------------------------------------------------------------------------------


class Doors:
    """The one HTTP listener (``api.host``/``api.port``) the ways in that speak HTTP share, built
    on first use: the webhooks (``/hooks``) and the API (``/v1``) mount on the same one."""

    def __init__(self, settings: Settings, listener: DoorListener | None = None) -> None:
        self._settings = settings
        self._listener = listener

    def listener(self) -> DoorListener:
        """The shared listener, made on first use."""
        if self._listener is None:
            self._listener = DoorListener(self._settings.api.host, self._settings.api.port)
        return self._listener


def webhook_targets(settings: Settings) -> list[str]:
    """The platforms the routes deliver to: they run with the webhooks (replies go out through them).
    A route delivering to a platform without its token is a configuration error naming the route."""
    tokens = {"telegram": settings.telegram_bot_token, "discord": settings.discord_bot_token}
    targets: list[str] = []
    for name, route in settings.webhooks.routes.items():
        if tokens[route.platform] is None:
            env = "TELEGRAM_BOT_TOKEN" if route.platform == "telegram" else "DISCORD_BOT_TOKEN"
            raise ConfigError(
                f"webhooks.routes.{name}.deliver_to: {route.deliver_to} needs {env}, which is not set"
            )
        targets.append(route.platform)
    return targets


def build_webhooks(
    settings: Settings, listener: DoorListener, environ: Mapping[str, str] | None = None
) -> WebhooksAdapter:
    """The webhooks adapter on ``listener``; every route's secret must be in the environment."""
    if not settings.webhooks.routes:
        raise ConfigError("--platform webhooks: no webhooks.routes are configured (docs/webhooks.md)")
    env = os.environ if environ is None else environ
    missing = missing_secrets(settings.webhooks, env)
    if missing:
        raise ConfigError("; ".join(missing))
    secrets = {n: env[r.secret_env].encode() for n, r in settings.webhooks.routes.items()}
    return WebhooksAdapter(listener, settings.webhooks.routes, secrets)
