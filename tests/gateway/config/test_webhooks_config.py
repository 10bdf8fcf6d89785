"""``webhooks:`` routes: checked when the settings load, secrets only from the environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.errors import ConfigError
from gateway.config import load_settings
from gateway.config.webhooks import WebhooksSettings, missing_secrets


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


def config_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route_yaml: str) -> None:
    path = tmp_path / "hygieia.yaml"
    path.write_text("webhooks:\n  routes:\n    github:\n" + route_yaml)
    monkeypatch.setenv("HYGIEIA_CONFIG", str(path))


def test_a_route_reads_from_yaml_with_its_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_with(
        tmp_path,
        monkeypatch,
        "      secret_env: GITHUB_WEBHOOK_SECRET\n"
        "      deliver_to: telegram:-1001234\n"
        '      template: "{{ repository.full_name }}: {{ head_commit.message }}"\n',
    )
    route = load_settings().webhooks.routes["github"]
    assert (route.platform, route.chat_id, route.signature) == ("telegram", "-1001234", "github")
    assert (route.deliver_only, route.coalesce_seconds, route.max_body_bytes) == (False, 0.0, 1_048_576)
    assert route.rate_per_minute == 60


def test_an_unknown_chat_prefix_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_with(tmp_path, monkeypatch, "      secret_env: S\n      deliver_to: slack:C123\n")
    with pytest.raises(ConfigError, match="telegram: or discord:"):
        load_settings()


def test_a_non_numeric_chat_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_with(tmp_path, monkeypatch, "      secret_env: S\n      deliver_to: telegram:@mychannel\n")
    with pytest.raises(ConfigError, match="numeric"):
        load_settings()


def test_a_template_that_does_not_parse_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_with(
        tmp_path,
        monkeypatch,
        '      secret_env: S\n      deliver_to: discord:1\n      template: "{{ a.__class__() }}"\n',
    )
    with pytest.raises(ConfigError, match="template"):
        load_settings()


def test_a_secret_written_in_the_yaml_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_with(
        tmp_path, monkeypatch, "      secret: hunter2\n      secret_env: S\n      deliver_to: discord:1\n"
    )
    with pytest.raises(ConfigError, match="secret"):
        load_settings()


def test_a_secret_env_that_is_not_a_variable_name_is_refused() -> None:
    with pytest.raises(ValueError, match="environment variable name"):
        WebhooksSettings(routes={"gh": {"secret_env": "sha256=abc", "deliver_to": "discord:1"}})  # type: ignore[dict-item]


def test_a_bad_route_name_is_refused() -> None:
    with pytest.raises(ValueError, match="route name"):
        WebhooksSettings(routes={"a/b": {"secret_env": "S", "deliver_to": "discord:1"}})  # type: ignore[dict-item]


def test_missing_secrets_names_the_route_and_the_variable() -> None:
    hooks = WebhooksSettings(routes={"gh": {"secret_env": "GH_SECRET", "deliver_to": "discord:1"}})  # type: ignore[dict-item]
    assert missing_secrets(hooks, {}) == [
        "webhooks.routes.gh.secret_env: GH_SECRET is not set in the environment"
    ]
    assert missing_secrets(hooks, {"GH_SECRET": "x"}) == []
