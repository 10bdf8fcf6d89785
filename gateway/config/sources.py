"""Where settings come from: the environment (``HYGIEIA_*``) and ``hygieia.yaml``, whose secrets are refused.

Secrets come only from the environment; a secret found in the YAML file is refused, so it never ends
up in git.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    YamlConfigSettingsSource,
)

from agent.errors import ConfigError

ENV_PREFIX = "HYGIEIA_"
SECRET_FIELDS = (
    "anthropic_api_key",
    "telegram_bot_token",
    "discord_bot_token",
    "admin_token",
    "transcription_api_key",
    "api_keys",
)
SECRET_ENV: dict[tuple[str, ...], str] = {
    ("anthropicapikey",): "ANTHROPIC_API_KEY",
    ("telegrambottoken",): "TELEGRAM_BOT_TOKEN",
    ("discordbottoken",): "DISCORD_BOT_TOKEN",
    ("admintoken",): "HYGIEIA_ADMIN_TOKEN",
    ("transcriptionapikey",): "HYGIEIA_TRANSCRIPTION_API_KEY",
    ("apikeys",): "HYGIEIA_API_KEYS",
    ("telegram", "webhooksecret"): "HYGIEIA_TELEGRAM__WEBHOOK_SECRET",
    ("telegramwebhooksecret",): "HYGIEIA_TELEGRAM__WEBHOOK_SECRET",
}
"""Secret-bearing settings (keys compacted: lower case, letters and digits only) and their env vars."""
SECRET_OWNERS: tuple[tuple[str, str], ...] = (
    ("webhook", "HYGIEIA_TELEGRAM__WEBHOOK_SECRET"),
    ("telegram", "TELEGRAM_BOT_TOKEN"),
    ("discord", "DISCORD_BOT_TOKEN"),
    ("transcription", "HYGIEIA_TRANSCRIPTION_API_KEY"),
    ("admin", "HYGIEIA_ADMIN_TOKEN"),
    ("anthropic", "ANTHROPIC_API_KEY"),
    ("claude", "ANTHROPIC_API_KEY"),
    ("api", "HYGIEIA_API_KEYS"),
)
"""A secret-looking key that is not one of ours, by the word in its path that says whose it is, and
the env var that secret is read from (first word found wins: ``telegram.webhook_token`` is the
webhook's)."""
_SECRET_ENDINGS = (
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "privatekey",
    "credentials",
    "authorization",
    "cookie",
)
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_REFERENCE_ONLY = re.compile(r"\s*(?:[A-Za-z]+\s+)?\$\{[A-Za-z_][A-Za-z0-9_]*\}\s*")
# A value naming its secret instead of holding it: ${NAME}, or a scheme word and one (Bearer ${NAME}).
_FREE_FORM = frozenset({"modelprices", "modelthresholds", "models"})  # keys there are model names


def _config_path() -> Path | None:
    explicit = os.environ.get("HYGIEIA_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"HYGIEIA_CONFIG: no such file: {path}")
        return path
    default = Path("hygieia.yaml")
    return default if default.is_file() else None


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's settings as a mapping; one clear :class:`ConfigError` line when it is not YAML."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({_yaml_problem(exc)})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold settings as 'key: value' lines, not a {type(data).__name__}")
    return data or {}


def config_file() -> tuple[Path, dict[str, Any]] | None:
    """The config file in use (``HYGIEIA_CONFIG``, else ``./hygieia.yaml``) and its settings, if any."""
    path = _config_path()
    return None if path is None else (path, read_config_file(path))


class SecretRefusingYamlSource(YamlConfigSettingsSource):
    """Reads ``hygieia.yaml``: one clear line when it is not YAML, and secrets in it refused."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        leaked = secrets_in(read_config_file(path))
        if leaked:
            raise ConfigError(refusal(path, leaked))
        super().__init__(settings_cls, yaml_file=path)


def _compact(key: str) -> str:
    compact = re.sub(r"[^a-z0-9]", "", key.lower())
    return compact.removeprefix("hygieia") or compact


@dataclass(frozen=True, slots=True)
class LeakedSecret:
    """A secret-looking key in the file: where (``telegram.token``) and the env var the service
    reads that secret from (``None``: no setting of ours holds such a secret)."""

    key: str
    env: str | None
    reference: bool = False
    """An MCP server's ``env:`` / ``headers:`` value: to be written ``${NAME}`` in the file, with NAME
    set in the environment."""


def secrets_in(data: Mapping[Any, Any], path: tuple[str, ...] = ()) -> list[LeakedSecret]:
    """Every secret-bearing key in ``data``, under any spelling, at any depth, with its env var."""
    found: list[LeakedSecret] = []
    for key, value in data.items():
        spelled = (*path, str(key))
        compact = tuple(_compact(k) for k in spelled)
        where = ".".join(spelled)
        if _resolved_at_start(compact) and isinstance(value, str) and _REFERENCE_ONLY.fullmatch(value):
            continue  # a ${NAME} reference, resolved from the environment when the server starts
        if compact in SECRET_ENV:
            found.append(LeakedSecret(where, SECRET_ENV[compact]))
        elif compact[0] == "mcpservers" and looks_secret(spelled):
            found.append(LeakedSecret(where, re.sub(r"[^A-Za-z0-9_]", "_", str(key)).upper(), reference=True))
        elif looks_secret(spelled):
            found.append(LeakedSecret(where, secret_env_for(compact)))
        elif compact == ("databaseurl",) and isinstance(value, str) and _has_password(value):
            found.append(LeakedSecret(where, ENV_PREFIX + "DATABASE_URL"))
        elif isinstance(value, Mapping) and compact[-1] not in _FREE_FORM:
            found.extend(secrets_in(value, spelled))
    return found


def looks_secret(path: tuple[str, ...]) -> bool:
    """Whether a key (by its path) names a secret: ``token``, ``api_key``, ``password``..."""
    last = _compact(path[-1])
    if last.endswith(_SECRET_ENDINGS):
        return True
    # No setting's name ends in "key(s)": one that does and names a service (anthropic_key) is its key.
    return last.endswith(("key", "keys")) and (len(path) > 1 or secret_env_for(path) is not None)


def secret_env_for(path: tuple[str, ...]) -> str | None:
    """The env var of the secret a secret-looking key would hold, from the words of its path
    (``("telegram", "token")``: ``TELEGRAM_BOT_TOKEN``); None when no setting holds such a secret."""
    compact = tuple(_compact(k) for k in path)
    joined = "".join(compact)
    if joined in ("apikey", "llmapikey", "llmkey"):  # the one API key there is: the model's
        return "ANTHROPIC_API_KEY"
    return next((env for word, env in SECRET_OWNERS if word in joined), None)


def refusal(path: Path, leaked: list[LeakedSecret]) -> str:
    """The one line refusing a file with secrets: each key, and where its value goes instead."""
    ours = [s for s in leaked if s.env is not None and not s.reference]
    named = [s for s in leaked if s.reference]
    stray = [s.key for s in leaked if s.env is None]
    parts: list[str] = []
    for s in named:
        parts.append(
            f"{s.key} must be written in the file as ${{{s.env}}}, with {s.env} set in the environment"
        )
    if ours:
        keys = ", ".join(dict.fromkeys(s.key for s in ours))
        envs = ", ".join(dict.fromkeys(str(s.env) for s in ours))
        parts.append(f"remove {keys} and set {envs} in the environment instead")
    if stray:
        known = ", ".join(dict.fromkeys(SECRET_ENV.values()))
        parts.append(
            f"remove {', '.join(stray)}: no setting holds such a secret (the secrets read are {known})"
        )
    return f"{path}: secrets are not read from the config file; " + "; ".join(parts)


def _resolved_at_start(compact: tuple[str, ...]) -> bool:
    """An MCP server's ``env:`` or ``headers:`` value: the only place ``${NAME}`` is resolved."""
    return len(compact) == 4 and compact[0] == "mcpservers" and compact[2] in ("env", "headers")


def _has_password(url: str) -> bool:
    try:
        return bool(urlsplit(url).password)
    except ValueError:
        return False


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(exc).replace("\n", " ")


def config_file_source(settings_cls: type[BaseSettings]) -> PydanticBaseSettingsSource | None:
    """The YAML file's settings (``HYGIEIA_CONFIG``, else ``./hygieia.yaml``), or None without one."""
    path = _config_path()
    return None if path is None else SecretRefusingYamlSource(settings_cls, path)


def resolve_references(value: str, environ: Mapping[str, str], where: str) -> str:
    """``value`` with every ``${NAME}`` replaced from ``environ``; one clear line when one is unset."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(f"{where}: ${{{name}}} is not set in the environment")
        return environ[name]

    return REFERENCE.sub(one, value)
