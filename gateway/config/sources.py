"""Where settings come from: the environment (``HYGIEIA_*``) and ``hygieia.yaml``, whose secrets are refused.

Secrets come only from the environment; a secret found in the YAML file is refused, so it never ends
up in git.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
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
)
SECRET_ENV: dict[tuple[str, ...], str] = {
    ("anthropicapikey",): "ANTHROPIC_API_KEY",
    ("telegrambottoken",): "TELEGRAM_BOT_TOKEN",
    ("discordbottoken",): "DISCORD_BOT_TOKEN",
    ("admintoken",): "HYGIEIA_ADMIN_TOKEN",
    ("transcriptionapikey",): "HYGIEIA_TRANSCRIPTION_API_KEY",
    ("telegram", "webhooksecret"): "HYGIEIA_TELEGRAM__WEBHOOK_SECRET",
    ("telegramwebhooksecret",): "HYGIEIA_TELEGRAM__WEBHOOK_SECRET",
}
"""Secret-bearing settings (keys compacted: lower case, letters and digits only) and their env vars."""
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


class SecretRefusingYamlSource(YamlConfigSettingsSource):
    """Reads ``hygieia.yaml``: one clear line when it is not YAML, and secrets in it refused."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({_yaml_problem(exc)})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot be read ({exc})") from None
        if data is not None and not isinstance(data, dict):
            raise ConfigError(
                f"{path}: must hold settings as 'key: value' lines, not a {type(data).__name__}"
            )
        leaked = secrets_in(data or {})
        if leaked:
            raise ConfigError(
                f"{path}: secrets are not read from the config file; remove them and set "
                f"{', '.join(dict.fromkeys(leaked))} in the environment instead"
            )
        super().__init__(settings_cls, yaml_file=path)


def _compact(key: str) -> str:
    compact = re.sub(r"[^a-z0-9]", "", key.lower())
    return compact.removeprefix("hygieia") or compact


def secrets_in(data: Mapping[Any, Any], path: tuple[str, ...] = ()) -> list[str]:
    """The env vars for every secret-bearing key in ``data``, under any spelling, at any depth."""
    found: list[str] = []
    for key, value in data.items():
        spelled = (*path, str(key))
        compact = tuple(_compact(k) for k in spelled)
        if _resolved_at_start(compact) and isinstance(value, str) and _REFERENCE_ONLY.fullmatch(value):
            continue  # a ${NAME} reference, resolved from the environment when the server starts
        if compact in SECRET_ENV:
            found.append(SECRET_ENV[compact])
        elif compact[-1].endswith(_SECRET_ENDINGS) and compact[0] == "mcpservers":
            found.append(
                f"{key} (written in the file as ${{{re.sub(r'[^A-Za-z0-9_]', '_', str(key)).upper()}}})"
            )
        elif compact[-1].endswith(_SECRET_ENDINGS):
            found.append(ENV_PREFIX + "__".join(re.sub(r"[^A-Za-z0-9]+", "_", k).upper() for k in spelled))
        elif compact == ("databaseurl",) and isinstance(value, str) and _has_password(value):
            found.append(ENV_PREFIX + "DATABASE_URL")
        elif isinstance(value, Mapping) and compact[-1] not in _FREE_FORM:
            found.extend(secrets_in(value, spelled))
    return found


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
