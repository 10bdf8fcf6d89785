"""What a configuration mistake is told: the env var the service really reads, the file's key path,
and the closest setting."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from agent.errors import ConfigError
from gateway.config import Settings, load_settings


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


SECRET = "123456:" + "s" * 40


def _secret_of(settings: Settings, env: str) -> str | None:
    """The value of the secret setting ``env`` feeds (None when it feeds none)."""
    fields = {
        "ANTHROPIC_API_KEY": settings.anthropic_api_key,
        "TELEGRAM_BOT_TOKEN": settings.telegram_bot_token,
        "DISCORD_BOT_TOKEN": settings.discord_bot_token,
        "HYGIEIA_ADMIN_TOKEN": settings.admin_token,
        "HYGIEIA_TRANSCRIPTION_API_KEY": settings.transcription_api_key,
        "HYGIEIA_TELEGRAM__WEBHOOK_SECRET": settings.telegram.webhook_secret,
    }
    value = fields.get(env)
    return None if value is None else value.get_secret_value()


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("telegram:\n  token: leaked\n", "TELEGRAM_BOT_TOKEN"),
        ("telegram:\n  bot_token: leaked\n", "TELEGRAM_BOT_TOKEN"),
        ("discord:\n  token: leaked\n", "DISCORD_BOT_TOKEN"),
        ("discord:\n  bot_token: leaked\n", "DISCORD_BOT_TOKEN"),
        ("admin:\n  token: leaked\n", "HYGIEIA_ADMIN_TOKEN"),
        ("admin:\n  api_token: leaked\n", "HYGIEIA_ADMIN_TOKEN"),
        ("anthropic:\n  api_key: leaked\n", "ANTHROPIC_API_KEY"),
        ("anthropic_key: leaked\n", "ANTHROPIC_API_KEY"),
        ("api_key: leaked\n", "ANTHROPIC_API_KEY"),
        ("media:\n  transcription:\n    api_key: leaked\n", "HYGIEIA_TRANSCRIPTION_API_KEY"),
        ("telegram:\n  webhook_token: leaked\n", "HYGIEIA_TELEGRAM__WEBHOOK_SECRET"),
        ("telegram:\n  webhook_secret: leaked\n", "HYGIEIA_TELEGRAM__WEBHOOK_SECRET"),
        ("telegram_bot_token: leaked\n", "TELEGRAM_BOT_TOKEN"),
        ("admin_token: leaked\n", "HYGIEIA_ADMIN_TOKEN"),
    ],
)
def test_the_env_var_a_secret_refusal_names_is_the_one_the_settings_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, yaml_text: str, expected: str
) -> None:
    config = tmp_path / "hygieia.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    named = set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b", str(caught.value)))
    assert named == {expected}
    config.unlink()
    monkeypatch.setenv(expected, SECRET)
    assert _secret_of(load_settings(), expected) == SECRET


def test_a_secret_no_setting_holds_is_refused_without_inventing_a_variable(tmp_path: Path) -> None:
    (tmp_path / "hygieia.yaml").write_text("backup:\n  password: leaked-value\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert "remove backup.password: no setting holds such a secret" in message
    assert "HYGIEIA_BACKUP" not in message and "leaked-value" not in message


@pytest.mark.parametrize(
    ("name", "real"),
    [
        ("HYGIEIA_TELEGRAM__TOKEN", "TELEGRAM_BOT_TOKEN"),
        ("HYGIEIA_DISCORD__TOKEN", "DISCORD_BOT_TOKEN"),
        ("HYGIEIA_ADMIN__TOKEN", "HYGIEIA_ADMIN_TOKEN"),
    ],
)
def test_a_secret_set_under_a_name_not_read_is_pointed_to_the_real_one(
    monkeypatch: pytest.MonkeyPatch, name: str, real: str
) -> None:
    monkeypatch.setenv(name, SECRET)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == f"{name} is not read; this secret is read from {real}"
    assert SECRET not in str(caught.value)


def test_a_yaml_typo_is_named_by_its_key_path_with_the_closest_setting(tmp_path: Path) -> None:
    (tmp_path / "hygieia.yaml").write_text("compression:\n  treshold: 0.5\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        "hygieia.yaml: compression.treshold is not a setting; did you mean compression.threshold?"
    )


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("modle: claude-sonnet-5-5\n", "hygieia.yaml: modle is not a setting; did you mean model?"),
        (
            "scheduler:\n  sweep:\n    min_fil: 0.5\n",
            "hygieia.yaml: scheduler.sweep.min_fil is not a setting; did you mean scheduler.sweep.min_fill?",
        ),
        (
            "overrides:\n  - platform: telegram\n    chat: '1'\n    modle: x\n",
            "hygieia.yaml: overrides[0].modle is not a setting; did you mean overrides[0].model?",
        ),
        (
            "models:\n  acme-large:\n    context_windw: 500000\n",
            "hygieia.yaml: models.acme-large.context_windw is not a setting; "
            "did you mean models.acme-large.context_window?",
        ),
        (
            "compression:\n  xyzzy: 1\n",
            "hygieia.yaml: compression.xyzzy is not a setting (docs/configuration.md lists the settings)",
        ),
    ],
)
def test_a_yaml_typo_at_any_depth_names_its_path(tmp_path: Path, yaml_text: str, expected: str) -> None:
    (tmp_path / "hygieia.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == expected


def test_a_bad_value_in_the_file_is_named_by_its_key_path(tmp_path: Path) -> None:
    (tmp_path / "hygieia.yaml").write_text("compression:\n  threshold: 1.5\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith("hygieia.yaml: compression.threshold: ")


def test_a_bad_value_from_the_environment_names_the_env_var_even_with_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "hygieia.yaml").write_text("compression:\n  threshold: 0.5\n")
    monkeypatch.setenv("HYGIEIA_COMPRESSION__THRESHOLD", "1.5")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith("HYGIEIA_COMPRESSION__THRESHOLD: ")


def test_an_env_var_typo_gets_the_closest_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYGIEIA_COMPRESSION__TRESHOLD", "0.5")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        "HYGIEIA_COMPRESSION__TRESHOLD is not a setting; did you mean HYGIEIA_COMPRESSION__THRESHOLD?"
    )
