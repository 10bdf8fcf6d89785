"""Every setting of the service in one typed object, read once and passed down."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agent.settings import (
    DEFAULT_MODEL,
    DEFAULT_SUMMARY_MODEL,
    MAX_TOKEN_COUNT,
    CompressionSettings,
    ContextSettings,
    HooksSettings,
    LLMSettings,
    ModelSpec,
    PromptCachingSettings,
)
from gateway.config.doors import ApiSettings
from gateway.config.sections import (
    AdminSettings,
    ChatOverride,
    ClusterSettings,
    DelegationSettings,
    DeliverySettings,
    DiscordSettings,
    McpServerSettings,
    MediaSettings,
    SchedulerSettings,
    SessionSettings,
    TelegramSettings,
    UserList,
    split_csv,
)
from gateway.config.sources import ENV_PREFIX, config_file_source
from gateway.config.webhooks import WebhooksSettings
from gateway.local_time import check_timezone


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
    context_window: int | None = Field(None, ge=1000, le=MAX_TOKEN_COUNT)

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
    transcription_api_key: SecretStr | None = None
    """``HYGIEIA_TRANSCRIPTION_API_KEY``: the bearer key of ``media.transcription.url``."""
    api_keys: SecretStr | None = None
    """``HYGIEIA_API_KEYS``: the OpenAI-compatible API's keys, comma-separated ``name=key`` pairs."""

    compression: CompressionSettings = Field(default_factory=CompressionSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    hooks: HooksSettings = Field(default_factory=HooksSettings)
    prompt_caching: PromptCachingSettings = Field(default_factory=PromptCachingSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    webhooks: WebhooksSettings = Field(default_factory=WebhooksSettings)
    """Inbound webhook routes served at ``/hooks/<route>`` on the api listener (docs/webhooks.md)."""
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    delegation: DelegationSettings = Field(default_factory=DelegationSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    model_prices: dict[str, tuple[float, float]] = Field(default_factory=dict)
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    """Per-model facts that override or extend agent.tokens.MODELS (keys: model-name substrings)."""
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    overrides: list[ChatOverride] = Field(default_factory=list)
    """Per-chat system prompt, model, summary model, token budget (gateway.serving.overrides)."""
    mcp_servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    """MCP servers whose tools the agent is offered (docs/tools.md), by name."""

    _validate_lists = field_validator("allowed_users", "admin_users", mode="before")(split_csv)

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

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, value: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", name):
                raise ValueError(f"server name {name!r}: use up to 40 letters, digits, '_' or '-'")
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
        from_file = config_file_source(settings_cls)
        if from_file is not None:
            sources.append(from_file)
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
