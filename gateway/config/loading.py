"""Building the settings: every validation failure becomes one line naming what to fix.

The line names the place the bad value came from: the env var (``HYGIEIA_COMPRESSION__THRESHOLD``)
when it is set, else the key path in the config file (``hygieia.yaml: compression.threshold``). An
unknown key gets a "did you mean" from the settings at that level; an unknown env var that looks
like a secret gets the variable that secret is really read from.
"""

from __future__ import annotations

import difflib
import os
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from agent.errors import ConfigError
from gateway.config.settings import Settings
from gateway.config.sources import ENV_PREFIX, config_file, looks_secret, secret_env_for

Loc = tuple[int | str, ...]
_ALIASED = ("anthropic_api_key", "anthropic_base_url", "telegram_bot_token", "discord_bot_token")
"""Settings read from an env var without the prefix (the SDKs' own names)."""


def load_settings(**overrides: Any) -> Settings:
    """Build the settings, turning any validation failure into one clear :class:`ConfigError` line."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        more = f"; and {exc.error_count() - 1} more problem(s)" if exc.error_count() > 1 else ""
        raise ConfigError(explain(exc.errors()[0], _file_or_none()) + more) from None
    except (ValueError, OSError) as exc:
        raise ConfigError(f"configuration: {exc}") from None


def _file_or_none() -> tuple[Path, dict[str, Any]] | None:
    try:
        return config_file()
    except ConfigError:  # cannot happen after the source read it; the env name serves then
        return None


def explain(error: ErrorDetails, file: tuple[Path, dict[str, Any]] | None) -> str:
    """One line for one validation error: where the value came from, what is wrong, what to do."""
    loc = tuple(error["loc"])
    unknown = error["type"] == "extra_forbidden"
    if file is not None and env_name_set(loc) is None and _in_file(file[1], loc):
        where = f"{file[0]}: {dotted(loc)}"
        if unknown:
            return f"{where} is not a setting{_suggestion(loc, dotted)}"
        return f"{where}: {error['msg']}{_shown(error)}"
    name = env_name_set(loc) or env_name(loc)
    if unknown:
        keys = tuple(str(p) for p in loc if not isinstance(p, int))
        real = secret_env_for(keys) if keys and looks_secret(keys) else None
        if real is not None:
            return f"{name} is not read; this secret is read from {real}"
        return f"{name} is not a setting{_suggestion(loc, env_name)}"
    return f"{name}: {error['msg']}{_shown(error)}"


def _shown(error: ErrorDetails) -> str:
    got = error.get("input")
    return "" if isinstance(got, dict) or got is None else f" (got {str(got)[:60]!r})"


def dotted(loc: Loc) -> str:
    """A key path as written in YAML: ``compression.threshold``, ``overrides[0].model``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def env_name(loc: Loc) -> str:
    """The env var that sets the key at ``loc`` (list items have none: their list's)."""
    parts = [str(p) for p in loc if not isinstance(p, int)]
    if not parts:
        return "settings"
    if parts[0].lower() in _ALIASED:
        return parts[0].upper()
    return ENV_PREFIX + "__".join(p.upper() for p in parts)


def env_name_set(loc: Loc) -> str | None:
    """The env var that gave the value at ``loc`` (its own, or its section's as JSON), if set."""
    present = {name.upper() for name in os.environ}
    parts = [str(p) for p in loc if not isinstance(p, int)]
    for depth in range(len(parts), 0, -1):
        name = env_name(tuple(parts[:depth]))
        if name in present:
            return name
    return None


def _in_file(data: Any, loc: Loc) -> bool:
    """Whether the file holds a value at ``loc`` (keys in any case, as the settings read them)."""
    node = data
    for part in loc:
        if isinstance(part, int):
            if not isinstance(node, list) or not -len(node) <= part < len(node):
                return False
            node = node[part]
        elif isinstance(node, Mapping):
            match = [v for k, v in node.items() if str(k).lower() == part.lower()]
            if not match:
                return False
            node = match[0]
        else:
            return False
    return True


def _suggestion(loc: Loc, spell: Any) -> str:
    """ "; did you mean X?" with X the closest key at the same level, spelled by ``spell``."""
    names = _names_at(loc[:-1])
    last = str(loc[-1]).lower()
    close = difflib.get_close_matches(last, names, n=1, cutoff=0.6) if names else []
    if not close:
        return " (docs/configuration.md lists the settings)"
    return f"; did you mean {spell((*loc[:-1], close[0]))}?"


def _names_at(loc: Loc) -> list[str]:
    """The keys the settings accept at ``loc`` (empty where any key goes, or where it is unknown)."""
    node: Any = Settings
    for part in loc:
        node = _step(node, part)
        if node is None:
            return []
    model = _model_of(node)
    return list(model.model_fields) if model is not None else []


def _model_of(node: Any) -> type[BaseModel] | None:
    if isinstance(node, type) and issubclass(node, BaseModel):
        return node
    if get_origin(node) in (Union, types.UnionType):
        return next((m for arg in get_args(node) if (m := _model_of(arg)) is not None), None)
    return None


def _step(node: Any, part: int | str) -> Any:
    """The type one key (or list index) below ``node``."""
    model = _model_of(node)
    if model is not None and isinstance(part, str):
        field = model.model_fields.get(part.lower())
        return None if field is None else field.annotation
    origin, args = get_origin(node), get_args(node)
    if origin in (Union, types.UnionType):
        return next(
            (s for arg in args if arg is not type(None) and (s := _step(arg, part)) is not None), None
        )
    if isinstance(part, int) and origin in (list, tuple, Sequence) and args:
        return args[0]
    if isinstance(part, str) and origin in (dict, Mapping) and len(args) == 2:
        return args[1]
    return None
