"""Configuration: ``hygieia.yaml`` (path in ``HYGIEIA_CONFIG``) overridden by ``HYGIEIA_*`` env vars.

Read once, into one :class:`Settings`, and passed down. Secrets come only from the
environment; a secret found in the YAML file is refused, so it never ends up in git.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from agent.errors import ConfigError
from agent.settings import (
    DEFAULT_MODEL,
    DEFAULT_SUMMARY_MODEL,
    CompressionSettings,
    LLMSettings,
    PromptCachingSettings,
)
from gateway.clock import check_timezone, parse_clock, parse_quiet_hours

ENV_PREFIX = "HYGIEIA_"
SECRET_FIELDS = ("anthropic_api_key", "telegram_bot_token", "discord_bot_token", "admin_token")
SECRET_ENV: dict[tuple[str, ...], str] = {
    ("anthropicapikey",): "ANTHROPIC_API_KEY",
    ("telegrambottoken",): "TELEGRAM_BOT_TOKEN",
    ("discordbottoken",): "DISCORD_BOT_TOKEN",
    ("admintoken",): "HYGIEIA_ADMIN_TOKEN",
    ("telegram", "webhooksecret"): "HYGIEIA_TELEGRAM__WEBHOOK_SECRET",
    ("telegramwebhooksecret",): "HYGIEIA_TELEGRAM__WEBHOOK_SECRET",
}
"""Secret-bearing settings (keys compacted: lower case, letters and digits only) and their env vars."""
_SECRET_ENDINGS = ("token", "secret", "password", "passwd", "apikey", "privatekey", "credentials")
_FREE_FORM = frozenset({"modelprices", "modelthresholds"})  # keys there are model names
DEFAULT_SYSTEM_PROMPT = (
    "You are Hygieia, a helpful assistant in a long-lived chat. Messages from people arrive with a short "
    "header naming the author and time. Earlier parts of a long conversation may have been summarized; "
    "use session_search and recall to look up what was said before when it matters."
)

UserList = Annotated[list[str], NoDecode]


def _time_of_day(value: str) -> str:
    parse_clock(value)
    return value


def _split_csv(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class TelegramSettings(BaseModel):
    """Keys under ``telegram:``."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(8443, ge=1, le=65535)
    webhook_secret: SecretStr | None = None
    ambient: bool = True
    poll_timeout: int = Field(10, ge=0, le=50)


class DiscordSettings(BaseModel):
    """Keys under ``discord:``."""

    model_config = ConfigDict(extra="forbid")

    ambient: bool = True
    shard_ids: list[int] | Literal["auto"] | None = None
    """Shards this process connects (with ``shard_count``); ``auto``: claim a fair, disjoint share
    through the database (several intake nodes); unset: one connection, or every shard of
    ``shard_count``. Env form: ``HYGIEIA_DISCORD__SHARD_IDS=0,1`` (or ``[0,1]``, or ``auto``)."""
    shard_count: int | None = Field(None, ge=1)
    """Shards of the bot; with ``auto`` and unset, the cluster's count (or Discord's recommendation)."""
    shard_lease_seconds: float = Field(15.0, ge=1.0, le=600.0)
    """``auto``: a node's claim on a shard lasts this long unrenewed (renewed every third of it), so a
    dead node's shards are taken over within about this time."""
    identify_interval_seconds: float = Field(5.0, ge=0.0, le=60.0)
    """``auto``: seconds between the shard connections this process opens (Discord allows a bot one
    session start per 5 s unless its ``max_concurrency`` is higher)."""
    slash_commands: bool = True
    command_guild_ids: list[int] | None = None
    """Register the slash commands in these guilds only (they appear at once: for development);
    unset registers them globally."""
    interaction_defer_seconds: float = Field(2.0, gt=0, lt=3.0)
    """An interaction not answered by then is acknowledged ("thinking...") and answered later."""

    @field_validator("shard_ids", mode="before")
    @classmethod
    def _shard_list(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]  # the env form "3" arrives JSON-decoded
        if not isinstance(value, str):
            return value
        if value.strip().lower() == "auto":
            return "auto"
        try:
            return [int(item) for item in value.split(",") if item.strip()]
        except ValueError:
            raise ValueError("a comma-separated list of shard numbers (0,1), or auto") from None

    @property
    def auto_shards(self) -> bool:
        return self.shard_ids == "auto"


class SessionSettings(BaseModel):
    """Keys under ``sessions:``: how chats map to sessions and when (if ever) they reset."""

    model_config = ConfigDict(extra="forbid")

    group_mode: Literal["shared", "per_user"] = "shared"
    idle_reset_minutes: int | None = Field(None, ge=1)
    daily_reset_hour: int | None = Field(None, ge=0, le=23)
    busy_mode: Literal["queue", "interrupt"] = "queue"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    hygiene_notice: bool = False
    max_inbound_chars: int = Field(32_000, ge=100)
    max_inbound_attachment_chars: int = Field(100_000, ge=100)
    """Characters kept of each text file that comes with a message (every platform)."""
    max_inbound_total_chars: int = Field(200_000, ge=100, le=500_000)
    """Characters kept of a whole message, its text and files together (every platform)."""
    turn_grace_seconds: float = Field(30.0, ge=0)
    # A compaction still running after this long gets the one-line "summarizing" notice.
    summarizing_notice_seconds: float = Field(5.0, ge=0)


class DeliverySettings(BaseModel):
    """Keys under ``delivery:``: how replies are shown and go out, and when a queue item becomes a
    dead letter."""

    model_config = ConfigDict(extra="forbid")

    streaming: bool = True
    """Show replies while they are written (Telegram, Discord, the interactive console); a piped
    console never streams."""
    edit_interval_seconds: float = Field(1.0, ge=0.2, le=10.0)
    """At most one edit of a streamed reply per chat this often (platform rate limits)."""
    max_reply_parts: int = Field(10, ge=1, le=100)
    """A reply that needs more messages is cut after this many, with a note on how to get the rest."""
    outbox_max_attempts: int = Field(6, ge=1, le=100)
    """Sends of one reply before it is marked failed (a dead letter) and the chat is told once."""
    inbox_max_attempts: int = Field(5, ge=2, le=100)
    """Tries at serving one received message before it is marked failed and the sender is told once."""
    retry_base_seconds: float = Field(2.0, gt=0, le=3600)
    retry_max_seconds: float = Field(600.0, gt=0, le=86400)


class MediaSettings(BaseModel):
    """Keys under ``media:``: pictures and PDFs the model is shown."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_download_bytes: int = Field(20_000_000, ge=1)
    """Files larger than this are not fetched (Telegram's bots cannot fetch more than 20 MB)."""
    max_images_per_message: int = Field(5, ge=0, le=20)
    max_session_images: int = Field(20, ge=0, le=100)
    """Pictures in a conversation's active part; older ones are summarized away by compaction."""
    max_image_edge: int = Field(1568, ge=200, le=8000)
    max_pdf_pages: int = Field(100, ge=1, le=100)
    max_pdf_text_chars: int = Field(100_000, ge=1000)


class AdminSettings(BaseModel):
    """Keys under ``admin:``."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)


class SweepSettings(BaseModel):
    """Keys under ``scheduler.sweep:``: compact idle, well-filled sessions during quiet hours."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    quiet_hours: str = "02:00-06:00"
    idle_minutes: int = Field(30, ge=0)
    min_fill: float = Field(0.6, gt=0.0, le=1.0)
    interval_seconds: int = Field(600, ge=1)
    max_sessions: int = Field(20, ge=1)

    @field_validator("quiet_hours")
    @classmethod
    def _window(cls, value: str) -> str:
        parse_quiet_hours(value)
        return value


class TaskSettings(BaseModel):
    """Keys under ``scheduler.tasks:``: reminders and recurring tasks set with the ``schedule`` tool."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    poll_seconds: float = Field(10.0, ge=0.1, le=3600)
    max_per_chat: int = Field(20, ge=1)
    min_interval_seconds: int = Field(300, ge=1)
    max_prompt_chars: int = Field(2000, ge=10)
    chat_timezones: dict[str, str] = Field(default_factory=dict)

    @field_validator("chat_timezones")
    @classmethod
    def _zones(cls, value: dict[str, str]) -> dict[str, str]:
        for zone in value.values():
            check_timezone(zone)
        return value


class ResetJobSettings(BaseModel):
    """Keys under ``scheduler.resets:``: end idle/daily sessions on schedule (needs a reset policy)."""

    model_config = ConfigDict(extra="forbid")

    interval_seconds: int = Field(300, ge=1)
    goodbye: Literal["none", "notice"] = "none"


class UpkeepSettings(BaseModel):
    """Keys under ``scheduler.upkeep:``: daily database care and pruning of finished queue rows."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    at: str = "04:30"
    prune_after_days: int = Field(30, ge=2)

    _check_at = field_validator("at")(_time_of_day)


class RetentionSettings(BaseModel):
    """Keys under ``scheduler.retention:``: delete archived messages after N days (off by default)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    archived_days: int = Field(365, ge=1)
    at: str = "04:45"

    _check_at = field_validator("at")(_time_of_day)


class SchedulerSettings(BaseModel):
    """Keys under ``scheduler:``: the jobs ``hygieia run`` schedules (run once per cluster)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    job_lease_seconds: float = Field(120.0, ge=1.0)
    sweep: SweepSettings = Field(default_factory=SweepSettings)
    tasks: TaskSettings = Field(default_factory=TaskSettings)
    resets: ResetJobSettings = Field(default_factory=ResetJobSettings)
    upkeep: UpkeepSettings = Field(default_factory=UpkeepSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)


class ClusterSettings(BaseModel):
    """Keys under ``cluster:``: several ``hygieia run`` processes on one PostgreSQL database.

    On SQLite (one process) none of these apply. See README "Scale-out".
    """

    model_config = ConfigDict(extra="forbid")

    intake_lease_seconds: float = Field(9.0, ge=2.0, le=300.0)
    """How long a platform's intake leadership lasts unrenewed: a standby takes over within this
    plus ``intake_lease_seconds / 4`` (its retry interval) plus the adapter's start."""
    session_lease_seconds: float | None = Field(None, ge=2.0, le=3600.0)
    """How long a worker's claim on a session's inbox items lasts unrenewed (renewed every third
    of it): a dead worker's chats move on after this. Default: 300 s on PostgreSQL."""
    outbox_lease_seconds: float = Field(120.0, ge=2.0, le=3600.0)
    """How long a delivery round owns a chat's due replies before another worker may send them."""
    inbox_poll_seconds: float = Field(0.5, ge=0.05, le=60.0)
    """How often a worker looks for inbox items received by another process."""
    metrics_port: int | None = Field(None, ge=0, le=65535)
    """Serve this process's own ``/metrics`` (role, leadership, leases) on this port; unset: none."""
    metrics_host: str = "127.0.0.1"


class Settings(BaseSettings):
    """Every setting of the service. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        case_sensitive=False,
        populate_by_name=True,
    )

    data_dir: Path = Path("./.hygieia")
    database_url: str | None = None
    timezone: str = "UTC"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["auto", "json", "text"] = "auto"

    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "anthropic_api_key")
    )
    anthropic_base_url: str | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "anthropic_base_url")
    )
    model: str = DEFAULT_MODEL
    summary_model: str = DEFAULT_SUMMARY_MODEL
    context_window: int | None = Field(None, ge=1000)

    telegram_bot_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("TELEGRAM_BOT_TOKEN", "telegram_bot_token")
    )
    telegram_base_url: str | None = None
    discord_bot_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("DISCORD_BOT_TOKEN", "discord_bot_token")
    )
    discord_api_base: str | None = None
    discord_gateway_url: str | None = None

    allowed_users: UserList = Field(default_factory=list)
    allow_all_users: bool = False
    admin_users: UserList = Field(default_factory=list)
    admin_token: SecretStr | None = None

    compression: CompressionSettings = Field(default_factory=CompressionSettings)
    prompt_caching: PromptCachingSettings = Field(default_factory=PromptCachingSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    model_prices: dict[str, tuple[float, float]] = Field(default_factory=dict)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)

    _validate_lists = field_validator("allowed_users", "admin_users", mode="before")(_split_csv)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        check_timezone(value)
        return value

    @field_validator("allowed_users", "admin_users")
    @classmethod
    def _platform_qualified(cls, value: list[str]) -> list[str]:
        for item in value:
            platform, _, user = item.partition(":")
            if not platform or not user:
                raise ValueError(f"{item!r} is not platform:user_id (for example telegram:12345)")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_path = _config_path()
        if config_path is not None:
            sources.append(_SecretRefusingYamlSource(settings_cls, config_path))
        return tuple(sources)

    @property
    def resolved_database_url(self) -> str:
        """The SQLAlchemy async URL, defaulting to SQLite under ``data_dir``."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'hygieia.db').resolve()}"

    @property
    def offline(self) -> bool:
        """True when no Anthropic key is configured: the offline provider answers."""
        return self.anthropic_api_key is None or not self.anthropic_api_key.get_secret_value()

    def is_allowed(self, platform: str, user_id: str) -> bool:
        """Default deny: only listed users, unless the bot is opened to everyone."""
        return self.allow_all_users or f"{platform}:{user_id}" in self.allowed_users

    def is_admin(self, platform: str, user_id: str) -> bool:
        return f"{platform}:{user_id}" in self.admin_users


def _config_path() -> Path | None:
    explicit = os.environ.get("HYGIEIA_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"HYGIEIA_CONFIG: no such file: {path}")
        return path
    default = Path("hygieia.yaml")
    return default if default.is_file() else None


class _SecretRefusingYamlSource(YamlConfigSettingsSource):
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
        if compact in SECRET_ENV:
            found.append(SECRET_ENV[compact])
        elif compact[-1].endswith(_SECRET_ENDINGS):
            found.append(ENV_PREFIX + "__".join(re.sub(r"[^A-Za-z0-9]+", "_", k).upper() for k in spelled))
        elif compact == ("databaseurl",) and isinstance(value, str) and _has_password(value):
            found.append(ENV_PREFIX + "DATABASE_URL")
        elif isinstance(value, Mapping) and compact[-1] not in _FREE_FORM:
            found.extend(secrets_in(value, spelled))
    return found


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
