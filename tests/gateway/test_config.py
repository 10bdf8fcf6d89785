"""Configuration: YAML file, env overrides, fixed env names, one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.errors import ConfigError
from gateway.config import load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("HYGIEIA_") or name in (
            "ANTHROPIC_API_KEY",
            "TELEGRAM_BOT_TOKEN",
            "DISCORD_BOT_TOKEN",
        ):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_defaults_use_sqlite_in_the_data_dir_and_deny_everyone() -> None:
    settings = load_settings()
    assert settings.resolved_database_url.startswith("sqlite+aiosqlite:///")
    assert settings.resolved_database_url.endswith(".hygieia/hygieia.db")
    assert settings.offline
    assert settings.allowed_users == [] and not settings.allow_all_users


def test_nested_env_var_overrides_the_yaml_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "custom.yaml"
    config.write_text("compression:\n  threshold: 0.6\n  protect_last_n: 7\nmodel: claude-opus-4-1\n")
    monkeypatch.setenv("HYGIEIA_CONFIG", str(config))
    monkeypatch.setenv("HYGIEIA_COMPRESSION__THRESHOLD", "0.4")
    settings = load_settings()
    assert settings.compression.threshold == 0.4
    assert settings.compression.protect_last_n == 7
    assert settings.model == "claude-opus-4-1"


def test_fixed_env_names_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "HYGIEIA_DATA_DIR": "/tmp/hy",
        "HYGIEIA_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1/test",
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "HYGIEIA_MODEL": "m1",
        "HYGIEIA_SUMMARY_MODEL": "m2",
        "HYGIEIA_CONTEXT_WINDOW": "20000",
        "TELEGRAM_BOT_TOKEN": "123:abc",
        "HYGIEIA_TELEGRAM_BASE_URL": "http://127.0.0.1:8081",
        "DISCORD_BOT_TOKEN": "d",
        "HYGIEIA_DISCORD_API_BASE": "http://127.0.0.1:1/api/v10",
        "HYGIEIA_DISCORD_GATEWAY_URL": "ws://127.0.0.1:1/gateway",
        "HYGIEIA_ALLOWED_USERS": "telegram:1, discord:2",
        "HYGIEIA_ALLOW_ALL_USERS": "false",
        "HYGIEIA_ADMIN_USERS": "telegram:1",
        "HYGIEIA_ADMIN_TOKEN": "secret",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s = load_settings()
    assert str(s.data_dir) == "/tmp/hy"
    assert s.resolved_database_url == env["HYGIEIA_DATABASE_URL"]
    assert s.anthropic_api_key is not None and s.anthropic_api_key.get_secret_value() == "sk-test"
    assert s.anthropic_base_url == "http://127.0.0.1:9"
    assert (s.model, s.summary_model, s.context_window) == ("m1", "m2", 20000)
    assert s.telegram_bot_token is not None and s.telegram_base_url == "http://127.0.0.1:8081"
    assert s.discord_api_base and s.discord_gateway_url and s.discord_bot_token
    assert s.allowed_users == ["telegram:1", "discord:2"]
    assert s.admin_users == ["telegram:1"]
    assert s.admin_token is not None and not s.offline


def test_allow_all_users_opens_the_bot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYGIEIA_ALLOW_ALL_USERS", "true")
    assert load_settings().allow_all_users


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("HYGIEIA_COMPRESSION__THRESHOLD", "1.5", "HYGIEIA_COMPRESSION__THRESHOLD"),
        ("HYGIEIA_CONTEXT_WINDOW", "lots", "HYGIEIA_CONTEXT_WINDOW"),
        ("HYGIEIA_ALLOWED_USERS", "12345", "HYGIEIA_ALLOWED_USERS"),
        ("HYGIEIA_PROMPT_CACHING__CACHE_TTL", "2h", "HYGIEIA_PROMPT_CACHING__CACHE_TTL"),
    ],
)
def test_a_bad_value_fails_with_one_line_naming_the_key(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith(expected)
    assert "\n" not in message


def test_a_secret_in_the_yaml_file_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "hygieia.yaml").write_text("anthropic_api_key: sk-leaked\n")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY in the environment"):
        load_settings()


def test_a_missing_config_file_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HYGIEIA_CONFIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigError, match="HYGIEIA_CONFIG"):
        load_settings()


def test_model_thresholds_longest_matching_key_wins() -> None:
    settings = load_settings(compression={"model_thresholds": {"claude": 0.6, "claude-haiku": 0.7}})
    assert settings.compression.threshold_for("claude-haiku-4-5") == 0.7
    assert settings.compression.threshold_for("claude-sonnet-4-5") == 0.6
    assert settings.compression.threshold_for("gpt") == 0.5


SECRET_SPELLINGS = [
    ("TELEGRAM_BOT_TOKEN: 123456:leaked-value\n", "TELEGRAM_BOT_TOKEN"),
    ("telegram_bot_token: 123456:leaked-value\n", "TELEGRAM_BOT_TOKEN"),
    ("Telegram-Bot-Token: 123456:leaked-value\n", "TELEGRAM_BOT_TOKEN"),
    ("ANTHROPIC_API_KEY: sk-leaked-value\n", "ANTHROPIC_API_KEY"),
    ("anthropicApiKey: sk-leaked-value\n", "ANTHROPIC_API_KEY"),
    ("DISCORD_BOT_TOKEN: leaked-value\n", "DISCORD_BOT_TOKEN"),
    ("Admin_Token: leaked-value-long-enough\n", "HYGIEIA_ADMIN_TOKEN"),
    ("HYGIEIA_ADMIN_TOKEN: leaked-value-long-enough\n", "HYGIEIA_ADMIN_TOKEN"),
    ("telegram:\n  webhook_secret: leaked-value\n", "HYGIEIA_TELEGRAM__WEBHOOK_SECRET"),
    ("telegram:\n  Webhook-Secret: leaked-value\n", "HYGIEIA_TELEGRAM__WEBHOOK_SECRET"),
    ("telegram:\n  bot_token: leaked-value\n", "TELEGRAM_BOT_TOKEN"),
    ("database_url: postgresql+psycopg://app:leaked-value@db/hygieia\n", "HYGIEIA_DATABASE_URL"),
]


@pytest.mark.parametrize(("yaml_text", "env_name"), SECRET_SPELLINGS)
def test_a_secret_under_any_spelling_is_refused_naming_the_env_var(
    tmp_path: Path, yaml_text: str, env_name: str
) -> None:
    (tmp_path / "hygieia.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert env_name in message and "environment" in message
    assert "leaked-value" not in message and "\n" not in message


def test_settings_that_merely_mention_tokens_are_not_secrets(tmp_path: Path) -> None:
    (tmp_path / "hygieia.yaml").write_text(
        "llm:\n  max_output_tokens: 1000\n  exact_token_counting: true\n"
        "database_url: postgresql+psycopg://app@db/hygieia\n"
    )
    settings = load_settings()
    assert settings.llm.max_output_tokens == 1000 and settings.llm.exact_token_counting


@pytest.mark.parametrize(
    "yaml_text",
    [
        "compression:\n  threshold: [0.5\n",
        "a: b: c\n",
        "sessions:\n\tgroup_mode: shared\n",
        "- just\n- a list\n",
    ],
)
def test_a_config_file_that_is_not_valid_yaml_is_one_line(tmp_path: Path, yaml_text: str) -> None:
    (tmp_path / "hygieia.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert "hygieia.yaml" in message and "\n" not in message


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "UTC+5", "../../etc/passwd", ""])
def test_an_unknown_timezone_is_refused_at_load(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    monkeypatch.setenv("HYGIEIA_TIMEZONE", zone)
    with pytest.raises(ConfigError, match="HYGIEIA_TIMEZONE"):
        load_settings()


def test_a_known_timezone_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYGIEIA_TIMEZONE", "Europe/Paris")
    assert load_settings().timezone == "Europe/Paris"


def test_server_side_strategy_keys_load_from_yaml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text(
        "compression:\n"
        "  server_clear_tool_uses: true\n"
        "  server_clear_keep: 5\n"
        "  server_clear_exclude_tools: [memory]\n"
        "  server_compaction: on\n"  # YAML's on: the default kind
    )
    monkeypatch.setenv("HYGIEIA_CONFIG", str(config))
    settings = load_settings()
    assert settings.compression.server_clear_tool_uses is True
    assert settings.compression.server_clear_keep == 5
    assert settings.compression.server_clear_exclude_tools == ["memory"]
    assert settings.compression.server_compaction == "on_demand"
    assert (
        load_settings(compression={"server_compaction": "threshold"}).compression.server_compaction
        == "threshold"
    )
    with pytest.raises(ConfigError):
        load_settings(compression={"server_compaction": "sometimes"})


def test_the_api_listener_defaults_to_loopback_port_8642() -> None:
    settings = load_settings()
    assert (settings.api.host, settings.api.port) == ("127.0.0.1", 8642)
    assert settings.api_keys is None


def test_the_api_listener_and_keys_come_from_their_env_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYGIEIA_API__HOST", "0.0.0.0")
    monkeypatch.setenv("HYGIEIA_API__PORT", "9100")
    monkeypatch.setenv("HYGIEIA_API_KEYS", "laptop=" + "k" * 24)
    settings = load_settings()
    assert (settings.api.host, settings.api.port) == ("0.0.0.0", 9100)
    assert settings.api_keys is not None and settings.api_keys.get_secret_value().startswith("laptop=")


@pytest.mark.parametrize("yaml", ["api_keys: laptop=kkkkkkkkkkkkkkkkkkkkkkkk\n", "api:\n  keys: x=y\n"])
def test_api_keys_in_the_yaml_file_are_refused_naming_their_env_var(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, yaml: str
) -> None:
    config = tmp_path / "hygieia.yaml"
    config.write_text(yaml)
    monkeypatch.setenv("HYGIEIA_CONFIG", str(config))
    with pytest.raises(ConfigError, match="set HYGIEIA_API_KEYS in the environment"):
        load_settings()
