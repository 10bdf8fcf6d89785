"""Building the settings: every validation failure becomes one line naming the env var to fix."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agent.errors import ConfigError
from gateway.config.settings import Settings
from gateway.config.sources import ENV_PREFIX


def _env_name(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc if not isinstance(p, int)]
    if not parts:
        return "settings"
    head = parts[0]
    if head in ("anthropic_api_key", "anthropic_base_url", "telegram_bot_token", "discord_bot_token"):
        return head.upper()
    return ENV_PREFIX + "__".join(p.upper() for p in parts)


def load_settings(**overrides: Any) -> Settings:
    """Build the settings, turning any validation failure into one clear :class:`ConfigError` line."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = _env_name(tuple(first["loc"]))
        got = first.get("input")
        shown = "" if isinstance(got, dict) or got is None else f" (got {str(got)[:60]!r})"
        more = f"; and {exc.error_count() - 1} more problem(s)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{name}: {first['msg']}{shown}{more}") from None
    except (ValueError, OSError) as exc:
        raise ConfigError(f"configuration: {exc}") from None
