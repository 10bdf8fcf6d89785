"""Keys under ``webhooks:``: the routes served at ``/hooks/<route>`` (docs/webhooks.md)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.platforms.webhooks.template import TemplateError, parse_template

DELIVER_PLATFORMS = ("telegram", "discord")
DEFAULT_TEMPLATE = "Webhook {{ $route }} ({{ $event }}):\n{{ $body }}"
_ROUTE_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class WebhookRoute(BaseModel):
    """One route: who may post (its secret), how the payload reads, where it goes."""

    model_config = ConfigDict(extra="forbid")

    secret_env: str
    """The environment variable holding the shared secret (never the secret itself)."""
    signature: Literal["github", "generic"] = "github"
    template: str = DEFAULT_TEMPLATE
    deliver_to: str
    """``telegram:<chat id>`` or ``discord:<channel id>``."""
    deliver_only: bool = False
    """Post the rendered text as a plain message (no model call) instead of a turn the agent answers."""
    coalesce_seconds: float = Field(0.0, ge=0, le=3600)
    """Deliveries to one chat within this many seconds of the first become one turn (or message)."""
    max_body_bytes: int = Field(1_048_576, ge=1, le=26_214_400)
    rate_per_minute: int = Field(60, ge=1, le=100_000)
    max_template_chars: int = Field(8000, ge=100, le=200_000)
    """The rendered text is cut here (with a note): a payload never floods the chat or the context."""
    events: list[str] = Field(default_factory=list)
    """Only these events (``X-GitHub-Event`` / ``X-Hygieia-Event``) are delivered; others get a 202
    ``ignored`` and are not stored (GitHub's ``ping`` on creating a hook). Empty: every event."""
    max_skew_seconds: int = Field(300, ge=1, le=86_400)
    """``generic`` signatures with a timestamp: how far it may be from now."""

    @field_validator("secret_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an environment variable name (the secret goes in the env)")
        return value

    @field_validator("deliver_to")
    @classmethod
    def _target(cls, value: str) -> str:
        platform, _, chat = value.partition(":")
        if platform not in DELIVER_PLATFORMS:
            raise ValueError(f"{value!r}: deliver_to starts with telegram: or discord: (not {platform!r})")
        if not re.fullmatch(r"-?\d{1,24}", chat):
            raise ValueError(f"{value!r}: the chat after '{platform}:' is a numeric chat or channel id")
        return value

    @field_validator("template")
    @classmethod
    def _parses(cls, value: str) -> str:
        try:
            parse_template(value)
        except TemplateError as exc:
            raise ValueError(f"template: {exc}") from None
        return value

    @property
    def platform(self) -> str:
        return self.deliver_to.partition(":")[0]

    @property
    def chat_id(self) -> str:
        return self.deliver_to.partition(":")[2]


class WebhooksSettings(BaseModel):
    """Keys under ``webhooks:``: ``routes``, by name (the path segment of ``/hooks/<name>``)."""

    model_config = ConfigDict(extra="forbid")

    routes: dict[str, WebhookRoute] = Field(default_factory=dict)

    @field_validator("routes")
    @classmethod
    def _names(cls, value: dict[str, WebhookRoute]) -> dict[str, WebhookRoute]:
        for name in value:
            if not _ROUTE_NAME.fullmatch(name):
                raise ValueError(f"route name {name!r}: use up to 40 letters, digits, '_' or '-'")
        return value


def missing_secrets(settings: WebhooksSettings, environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per route whose ``secret_env`` is unset or empty (startup refuses, doctor fails)."""
    env = os.environ if environ is None else environ
    return [
        f"webhooks.routes.{name}.secret_env: {route.secret_env} is not set in the environment"
        for name, route in settings.routes.items()
        if not env.get(route.secret_env)
    ]
