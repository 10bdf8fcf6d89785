"""Configuration: ``hygieia.yaml`` (path in ``HYGIEIA_CONFIG``) overridden by ``HYGIEIA_*`` env vars.

Read once, into one :class:`Settings`, and passed down. ``sections`` holds one model per section,
``settings`` the whole, ``sources`` where values come from (secrets only from the environment),
``loading`` the one function that builds it with a one-line error.
"""

from gateway.config.doors import ApiSettings
from gateway.config.loading import load_settings
from gateway.config.sections import (
    DEFAULT_SYSTEM_PROMPT,
    AdminSettings,
    ChatOverride,
    ClusterSettings,
    DeliverySettings,
    DiscordSettings,
    McpServerSettings,
    MediaSettings,
    ResetJobSettings,
    RetentionSettings,
    SchedulerSettings,
    SessionSettings,
    SweepSettings,
    TaskSettings,
    TelegramSettings,
    ToolGlobs,
    TranscriptionSettings,
    UpkeepSettings,
    UserList,
)
from gateway.config.settings import Settings
from gateway.config.sources import ENV_PREFIX, SECRET_ENV, SECRET_FIELDS, secrets_in

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ENV_PREFIX",
    "SECRET_ENV",
    "SECRET_FIELDS",
    "AdminSettings",
    "ApiSettings",
    "ChatOverride",
    "ClusterSettings",
    "DeliverySettings",
    "DiscordSettings",
    "McpServerSettings",
    "MediaSettings",
    "ResetJobSettings",
    "RetentionSettings",
    "SchedulerSettings",
    "SessionSettings",
    "Settings",
    "SweepSettings",
    "TaskSettings",
    "TelegramSettings",
    "ToolGlobs",
    "TranscriptionSettings",
    "UpkeepSettings",
    "UserList",
    "load_settings",
    "secrets_in",
]
